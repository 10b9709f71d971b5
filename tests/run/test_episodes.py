"""The trajectory viewer (``python -m core.report RUN_DIR --episodes``): pages built from real rollout records,
checked for structure and rendered in headless Chromium to see the screenshot load and the markers land."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from PIL import Image

from core.metrics import write_trajectories
from core.types import (Action, ActionType, EpisodeStatus, Judgement, Observation, Screenshot, Trajectory, Turn)

ROOT = Path(__file__).resolve().parents[2]
GREEN = (20, 160, 60)


def shot(colour=GREEN) -> Screenshot:
    buffer = io.BytesIO()
    Image.new("RGB", (400, 250), colour).save(buffer, "PNG")
    return Screenshot.from_png(buffer.getvalue())


def trajectories() -> list[Trajectory]:
    click = Action(type=ActionType.LEFT_CLICK, x=500, y=500)
    typed = Action(type=ActionType.TYPE, text="wc -l <log>")
    win = Trajectory("it000001-t0000-r00", "os-count-lines", "g0", status=EpisodeStatus.COMPLETED,
                     judgement=Judgement(score=1.0, details={"metrics": [{"func": "exact_match"}]}), reward=1.0,
                     initial_observation=Observation(screenshot=shot()), metadata={"advantage": 0.87})
    win.turns = [Turn(0, "<tool_call>click</tool_call>", [1], [-0.1], [click], observation=Observation(screenshot=shot())),
                 Turn(1, "<tool_call>type</tool_call>", [2], [-0.2], [typed], observation=Observation(screenshot=shot()),
                      feedback="cursor at (500, 500)"),
                 Turn(2, "garbage", [3], [-3.0], [], parse_error="no <tool_call> block")]
    lose = Trajectory("it000001-t0000-r01", "os-count-lines", "g0", status=EpisodeStatus.INCOMPLETE,
                      status_reason="max turns", judgement=Judgement(score=0.0), reward=-0.2,
                      metadata={"advantage": -0.87})
    lose.turns = [Turn(0, "<b>not html</b>", [4], [-1.0], [typed])]
    return [win, lose]


class Outline(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.episodes, self.turns, self.marks, self.images, self.links = 0, 0, [], [], []
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.episodes += "episode" in (a.get("class") or "").split()
        self.turns += "turn" in (a.get("class") or "").split()
        if "mark" in (a.get("class") or "").split():
            self.marks.append(a.get("data-action"))
        if tag == "img":
            self.images.append(a["src"])
        if tag == "a":
            self.links.append(a["href"])

    def handle_data(self, data):
        self.text.append(data)


def test_pages_show_every_episode_turn_action_and_judgement(tmp_path) -> None:
    run = tmp_path / "run"
    write_trajectories(run / "rollouts" / "iter_000001.jsonl", trajectories(), screenshots=True)
    proc = subprocess.run([sys.executable, "-m", "core.report", str(run), "--episodes"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    pages = run / "report" / "episodes"
    index = Outline()
    index.feed((pages / "index.html").read_text())
    assert index.links == ["iter_000001.html"] and "50%" in "".join(index.text)
    page = Outline()
    page.feed((pages / "iter_000001.html").read_text())
    text = "".join(page.text)
    assert page.episodes == 2 and page.turns == 4
    assert page.marks == ["left_click", "type"]  # the losing episode's turn has no screenshot to draw on
    assert "no <tool_call> block" in text and "<b>not html</b>" in text and "score 1.0 (ok)" in text
    assert "advantage 0.87" in text and "max turns" in text and "cursor at (500, 500)" in text
    assert page.images and all((pages / src).resolve().is_file() for src in page.images)


def test_a_rendered_page_shows_the_screenshot_and_the_click_where_it_acted(tmp_path) -> None:
    run = tmp_path / "run"
    write_trajectories(run / "rollouts" / "eval_000000.jsonl", trajectories()[:1], screenshots=True)
    from core.episodes import write_episode_pages

    assert shutil.which("chromium"), "needs chromium on PATH (scripts/install.sh installs it)"
    page = write_episode_pages(run).with_name("eval_000000.html")
    png = tmp_path / "page.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1200,1400", f"--screenshot={png}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    image = Image.open(png).convert("RGB")
    pixels = image.load()
    greens = [(x, y) for x in range(0, image.width, 2) for y in range(0, image.height, 2) if pixels[x, y] == GREEN]
    assert len(greens) > 5000, "the screenshots did not load"
    # the first screenshot: 400x250 shown 560 px wide, so its box is the green block's width by 5/8 of it
    x0, x1, y0 = min(x for x, _ in greens), max(x for x, _ in greens), min(y for _, y in greens)
    y1 = y0 + (x1 - x0) * 250 // 400
    reds = [(x, y) for x in range(x0, x1) for y in range(y0, y1)
            if pixels[x, y][0] > 180 and pixels[x, y][1] < 80 and pixels[x, y][2] < 110]
    assert reds, "no click marker was drawn on the first screenshot"
    cx, cy = sum(x for x, _ in reds) / len(reds), sum(y for _, y in reds) / len(reds)
    # the click at (500, 500) of the 0..1000 grid lands at the screenshot's centre
    assert abs(cx - (x0 + x1) / 2) < 0.05 * (x1 - x0) and abs(cy - (y0 + y1) / 2) < 0.05 * (y1 - y0)
