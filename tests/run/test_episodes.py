"""The trajectory viewer (``python -m core.report RUN_DIR --episodes``): pages built from real rollout records,
checked for structure and rendered in headless Chromium to see the screenshot load, the markers land and the
filters (inline script) hide what they should; the before/after page; the screenshot policy."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
import json
from pathlib import Path

from PIL import Image

from core.runtime.metrics import write_trajectories
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
    assert index.links == ["iter_000001.html", "iter_000001.html#it000001-t0000-r00",
                           "iter_000001.html#it000001-t0000-r01"] and "50%" in "".join(index.text)
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
    from core.runtime.episodes import write_episode_pages

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


def chromium(*args: str) -> subprocess.CompletedProcess:
    assert shutil.which("chromium"), "needs chromium on PATH (scripts/install.sh installs it)"
    return subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=120, check=True)


def shown(dom: str) -> list[tuple[str, str]]:
    """(task, outcome) of every episode the rendered page leaves visible."""
    found = []
    for tag in re.findall(r'<div class="episode[^"]*"[^>]*>', dom):
        if "display: none" not in tag:
            found.append((re.search(r'data-task="([^"]*)"', tag)[1], re.search(r'data-outcome="([^"]*)"', tag)[1]))
    return found


def mixed() -> list[Trajectory]:
    """Two tasks, a success and a failure each."""
    out = []
    for task in ("os-count-lines", "os-make-executable"):
        for r, score in enumerate((1.0, 0.0)):
            t = Trajectory(f"it000002-{task}-r{r}", task, task, status=EpisodeStatus.COMPLETED,
                           judgement=Judgement(score=score), reward=score, initial_observation=Observation(shot()))
            t.turns = [Turn(0, "<tool_call>click</tool_call>", [1], [-0.1], [Action(type=ActionType.LEFT_CLICK,
                                                                                    x=100, y=100)])]
            out.append(t)
    return out


def test_the_filters_hide_every_episode_but_the_chosen_task_and_outcome(tmp_path) -> None:
    run = tmp_path / "run"
    write_trajectories(run / "rollouts" / "iter_000002.jsonl", mixed(), screenshots=True)
    write_trajectories(run / "rollouts" / "iter_000003.jsonl", mixed()[:1], screenshots=True)
    from core.runtime.episodes import write_episode_pages

    index = write_episode_pages(run)
    page = index.with_name("iter_000002.html")
    everything = chromium("--dump-dom", page.as_uri()).stdout
    assert len(shown(everything)) == 4 and '<span id="shown">4</span>' in everything
    dom = chromium("--dump-dom", page.as_uri() + "?task=os-make-executable&outcome=failure").stdout
    assert shown(dom) == [("os-make-executable", "failure")] and '<span id="shown">1</span>' in dom
    # the index lists every episode of every file; its iteration filter keeps one file's
    dom = chromium("--dump-dom", index.as_uri() + "?iteration=iter_000003").stdout
    rows = [tag for tag in re.findall(r'<tr class="filterable[^"]*"[^>]*>', dom)]
    assert len(rows) == 5 and [("iter_000003" in r) for r in rows if "display: none" not in r] == [True]


def test_the_compare_page_shows_before_and_after_side_by_side(tmp_path) -> None:
    from core.runtime.episodes import write_compare_page

    blue = (30, 60, 200)
    before, after = mixed(), mixed()
    for t in after:
        t.initial_observation = Observation(shot(blue))
    write_trajectories(tmp_path / "before" / "rollouts" / "eval_000000.jsonl", before, screenshots=True)
    write_trajectories(tmp_path / "after" / "rollouts" / "eval_000000.jsonl", after, screenshots=True)
    page = write_compare_page(tmp_path / "evaluate" / "report" / "pool.html",
                              {"before": tmp_path / "before", "after": tmp_path / "after"}, "pool: before / after")
    png = tmp_path / "page.png"
    chromium("--window-size=1400,1200", f"--screenshot={png}", page.as_uri())
    image = Image.open(png).convert("RGB")
    pixels = image.load()
    cells = [(x, y) for x in range(0, image.width, 3) for y in range(0, image.height, 3)]
    greens = [(x, y) for x, y in cells if pixels[x, y] == GREEN]
    blues = [(x, y) for x, y in cells if pixels[x, y] == blue]
    assert len(greens) > 2000 and len(blues) > 2000, "the screenshots did not load"
    # the same task's first episodes: before on the left, after on the right, at the same height
    assert max(x for x, _ in greens) < min(x for x, _ in blues)
    assert abs(min(y for _, y in greens) - min(y for _, y in blues)) < 6
    dom = chromium("--dump-dom", page.as_uri() + "?outcome=success").stdout
    assert shown(dom) == [("os-count-lines", "success")] * 2 + [("os-make-executable", "success")] * 2
    dom = chromium("--dump-dom", page.as_uri() + "?task=os-make-executable").stdout
    assert '<span id="shown">4</span>' in dom  # its before and after episodes; the other task's row is hidden


def test_kept_screenshots_are_downscaled_capped_and_the_recording_linked(tmp_path) -> None:
    from core.runtime.episodes import write_episode_pages
    from core.runtime.shots import ScreenshotPolicy

    trajs = trajectories()[:1]
    trajs[0].metadata["recording"] = "recordings/ep.mp4"
    path = write_trajectories(tmp_path / "run" / "rollouts" / "eval_000000.jsonl", trajs,
                              screenshots=ScreenshotPolicy(max_side=100))
    record = json.loads(path.read_text())
    assert Image.open(path.parent / record["initial_screenshot"]).size == (100, 63)
    assert record["screenshot_max_side"] == 100 and "screenshots_dropped" not in record
    page = write_episode_pages(tmp_path / "run").with_name("eval_000000.html").read_text()
    assert '<video controls preload="none" width="560" src="../../rollouts/recordings/ep.mp4">' in page

    one = len((path.parent / record["initial_screenshot"]).read_bytes())
    capped = write_trajectories(tmp_path / "capped" / "rollouts" / "eval_000000.jsonl", trajectories()[:1],
                                screenshots=ScreenshotPolicy(max_side=100, budget_mb=2.5 * one / (1024 * 1024)))
    record = json.loads(capped.read_text())
    assert len(list((capped.parent / "shots").glob("*.png"))) == 2 and record["screenshots_dropped"] == 1
    page = write_episode_pages(tmp_path / "capped").with_name("eval_000000.html").read_text()
    assert "1 screenshots not kept (over run.screenshot_budget_mb)" in page
