"""Screenshots kept beside rollout records, and screenshots with the agent's actions drawn on them.

:class:`ScreenshotPolicy` (from ``run.save_screenshots`` / ``run.screenshot_max_side`` /
``run.screenshot_budget_mb``) decides what :func:`core.runtime.metrics.write_trajectories` keeps: every screenshot
at full size (the default: a record then replays into exactly what the agent saw, see
:mod:`core.runtime.demonstrations`), or downscaled to a longest side (for viewing: the recipe's evaluate stage keeps
them so), and at most a budget of megabytes per rollouts directory (past it, records say how many
screenshots they dropped). :func:`draw_actions` renders one turn the way the episode viewer overlays it
(click markers, drag and scroll arrows, typed text and keys as labels), for the trackers' images
(:func:`sample_images`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from core.types import Action, Screenshot, Trajectory

MB = 1024 * 1024
#: marker colours per action type (the viewer's SVG overlay uses the same)
POINT_MARKS = {"left_click": "#e11d48", "right_click": "#7c3aed", "middle_click": "#0891b2",
               "double_click": "#ea580c", "triple_click": "#ca8a04", "mouse_move": "#2563eb",
               "left_mouse_down": "#be123c", "left_mouse_up": "#be123c", "left_click_drag": "#db2777",
               "scroll": "#059669"}
ARROWS = {"up": (0, -60), "down": (0, 60), "left": (-60, 0), "right": (60, 0)}


@dataclass(frozen=True)
class ScreenshotPolicy:
    """``max_side``: downscale so the longer side is at most this many pixels (None: full size);
    ``budget_mb``: stop keeping screenshots once the directory's ``shots/`` holds this much (None: no cap)."""

    max_side: int | None = None
    budget_mb: float | None = None

    @classmethod
    def of(cls, run: Any) -> ScreenshotPolicy | None:
        """The policy of a config's ``run`` section; None when it keeps no screenshots."""
        if not run.save_screenshots:
            return None
        return cls(run.screenshot_max_side, run.screenshot_budget_mb)


def shrink_png(png: bytes, max_side: int | None) -> bytes:
    """``png`` with its longer side at most ``max_side`` (unchanged when already that small)."""
    if max_side is None:
        return png
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        if max(img.size) <= max_side:
            return png
        img = img.convert("RGB")
        img.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        img.save(out, "PNG", optimize=True)
        return out.getvalue()


class ShotWriter:
    """Writes one rollouts directory's screenshots under a :class:`ScreenshotPolicy`."""

    def __init__(self, directory: Path, policy: ScreenshotPolicy) -> None:
        self.directory = directory
        self.policy = policy
        self.shots = directory / "shots"
        self.used = sum(p.stat().st_size for p in self.shots.glob("*.png")) if self.shots.is_dir() else 0
        self.dropped = 0

    def write(self, name: str, screenshot: Screenshot) -> str | None:
        """Save ``shots/<name>.png``; returns its path relative to the directory, None when over budget."""
        png = shrink_png(screenshot.png, self.policy.max_side)
        budget = self.policy.budget_mb
        if budget is not None and self.used + len(png) > budget * MB:
            self.dropped += 1
            return None
        self.shots.mkdir(parents=True, exist_ok=True)
        rel = f"shots/{name}.png"
        (self.directory / rel).write_bytes(png)
        self.used += len(png)
        return rel


def _hex(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def action_label(action: Mapping[str, Any]) -> str:
    kind = action.get("type", "?")
    if action.get("text") is not None:
        return f"{kind} {action['text']!r}"
    if action.get("keys"):
        return f"{kind} {'+'.join(action['keys'])}"
    if kind == "scroll":
        return f"scroll {action.get('direction', '')} {action.get('amount', '')}".strip()
    if action.get("x") is not None:
        return f"{kind} ({action['x']}, {action['y']})"
    return str(kind)


def draw_actions(screenshot: Screenshot, actions: Sequence[Action | Mapping[str, Any]]) -> Any:
    """A PIL image of ``screenshot`` with ``actions`` (0..1000 grid) drawn on it, numbered in order."""
    from PIL import ImageDraw

    img = screenshot.to_pil()
    draw = ImageDraw.Draw(img)
    w, h = img.size
    radius, width = max(4, round(min(w, h) * 0.018)), max(2, round(min(w, h) * 0.006))
    label_y = 4
    for number, raw in enumerate(actions, 1):
        action = raw.model_dump(mode="json", exclude_none=True) if isinstance(raw, Action) else dict(raw)
        kind, colour = str(action.get("type")), _hex(POINT_MARKS.get(str(action.get("type")), "#111111"))
        if action.get("x") is not None and action.get("y") is not None:
            x, y = action["x"] * w / 1000, action["y"] * h / 1000
            if action.get("start_x") is not None and action.get("start_y") is not None:
                draw.line([(action["start_x"] * w / 1000, action["start_y"] * h / 1000), (x, y)], fill=colour,
                          width=width)
            if kind == "scroll" and action.get("direction") in ARROWS:
                dx, dy = ARROWS[action["direction"]]
                draw.line([(x, y), (x + dx * w / 1000, y + dy * h / 1000)], fill=colour, width=width)
            draw.ellipse([x - radius, y - radius, x + radius, y + radius], outline=colour, width=width)
            draw.text((x + radius + 2, y - 2 * radius), str(number), fill=colour)
        else:
            text = f"{number}. {action_label(action)[:60]}"
            box = draw.textbbox((4, label_y), text)
            draw.rectangle(box, fill=(255, 255, 255))
            draw.text((4, label_y), text, fill=(17, 17, 17))
            label_y = box[3] + 3
    return img


def sample_images(trajectories: Iterable[Trajectory], count: int) -> dict[str, Any]:
    """Up to ``count`` first screenshots with the first turn's actions drawn, one per task, successes and
    failures alternating, keyed ``rollouts/<task>/<success|failure>``."""
    successes: list[Trajectory] = []
    failures: list[Trajectory] = []
    seen: set[str] = set()
    for traj in trajectories:
        first = traj.initial_observation
        if traj.task_id in seen or not traj.turns or first is None or first.screenshot is None:
            continue
        seen.add(traj.task_id)
        (successes if traj.success else failures).append(traj)
    chosen: list[Trajectory] = []
    while len(chosen) < count and (successes or failures):
        for bucket in (successes, failures):
            if bucket and len(chosen) < count:
                chosen.append(bucket.pop(0))
    return {f"rollouts/{t.task_id}/{'success' if t.success else 'failure'}":
            draw_actions(t.initial_observation.screenshot, t.turns[0].actions)  # type: ignore[union-attr]
            for t in chosen}
