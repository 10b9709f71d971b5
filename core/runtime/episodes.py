"""The trajectory viewer: static HTML pages of a run's episodes, from its rollout records.

``python -m core.report RUN_DIR --episodes`` reads ``RUN_DIR/rollouts/*.jsonl`` (training iterations,
the initial pass, ``core.eval`` and periodic evaluations alike) and writes ``RUN_DIR/report/episodes/``:

* ``index.html`` — every rollout file with its episode count and success rate, and per task the
  successes over all files;
* one page per rollout file — per episode its task, status, reward, advantage, the judge's score,
  status and details and its screen recording where the environment made one; then every turn: the
  screenshot the agent saw before acting (saved with ``run.save_screenshots``) with each action drawn
  where it acted (click markers, drag arrows, scroll arrows, typed text and keys as labels), the
  model's response, the parsed actions or the parse error, and the feedback that came back.

Every page filters its episodes by task and outcome (and the index's table of all episodes by
iteration, i.e. rollout file) with a few lines of inline script; ``page.html?task=X&outcome=failure``
opens filtered. :func:`write_compare_page` puts several runs' episodes of each task side by side (the
recipe's evaluate stage: before and after RL).

Action coordinates are on the model's 0..1000 grid, so markers are drawn in an SVG overlay with that
view box, at any screenshot size. Pages reference the PNGs by relative path (nothing is copied) and
need no network.
"""

from __future__ import annotations

import html
import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping

from core.errors import ScaleCUAError
from core.runtime.shots import ARROWS, POINT_MARKS, action_label

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
.episode{border:1px solid #bbb;border-radius:6px;margin:1.2em 0;padding:.6em 1em}
.ok{color:#17803d}.fail{color:#b42318}.turn{display:flex;gap:1em;margin:.8em 0;align-items:flex-start}
.shot{position:relative;width:560px;flex:none}.shot img{width:100%;display:block;border:1px solid #999}
.shot svg{position:absolute;left:0;top:0;width:100%;height:100%}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.4em;margin:.2em 0;max-width:60em}
.noshot{width:560px;height:80px;border:1px dashed #aaa;display:flex;align-items:center;justify-content:center}
.filters{position:sticky;top:0;background:#fff;padding:.4em 0;border-bottom:1px solid #ddd;z-index:2}
.compare{display:grid;gap:1em;align-items:start}.compare .shot,.compare .noshot{width:400px}
.compare pre{max-width:400px;overflow-wrap:anywhere}.compare p{overflow-wrap:anywhere}
.compare .turn{flex-direction:column}.compare h2{margin:.2em 0}.row{border-top:2px solid #888;margin-top:1em}
"""
#: the filters: every element with class ``filterable`` is hidden when a filter's value differs from its
#: ``data-<key>`` (elements without that key ignore the filter); ``?task=...&outcome=...`` in the URL presets them
SCRIPT = """
function scalecuaFilter(){
  const f={};document.querySelectorAll('select.filter').forEach(s=>{f[s.dataset.key]=s.value;});
  let shown=0;
  document.querySelectorAll('.filterable').forEach(el=>{
    const ok=Object.entries(f).every(([k,v])=>!v||el.dataset[k]===undefined||el.dataset[k]===v);
    el.style.display=ok?'':'none';
    if(ok&&el.classList.contains('counted')&&!el.parentElement.closest('.filterable[style*="none"]'))shown++;});
  const c=document.getElementById('shown');if(c)c.textContent=shown;
}
document.addEventListener('DOMContentLoaded',()=>{
  const q=new URLSearchParams(location.search);
  document.querySelectorAll('select.filter').forEach(s=>{
    if(q.has(s.dataset.key))s.value=q.get(s.dataset.key);s.addEventListener('change',scalecuaFilter);});
  scalecuaFilter();
});
"""


def read_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ScaleCUAError(f"{path}:{number}: not a JSON trajectory record ({exc})") from None
    return records


def png_aspect(path: Path) -> float:
    """Height / width of a PNG, from its header (1.0 when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(24)
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        return height / width if head[:8] == b"\x89PNG\r\n\x1a\n" and width else 1.0
    except OSError:
        return 1.0


def action_marks(actions: Iterable[Mapping[str, Any]], aspect: float = 1.0) -> str:
    """SVG elements for the actions of one turn, numbered in order, in a view box 1000 wide and
    ``1000 * aspect`` high (grid y values are scaled by ``aspect``, so markers stay round)."""
    parts, label_y = [], 40
    for number, action in enumerate(actions, 1):
        kind, x, y = action.get("type"), action.get("x"), action.get("y")
        y = None if y is None else round(y * aspect)
        if action.get("start_y") is not None:
            action = {**action, "start_y": round(action["start_y"] * aspect)}
        colour = POINT_MARKS.get(str(kind), "#111")
        if x is not None and y is not None:
            if action.get("start_x") is not None:
                parts.append(f'<line x1="{action["start_x"]}" y1="{action["start_y"]}" x2="{x}" y2="{y}" '
                             f'stroke="{colour}" stroke-width="6" marker-end="url(#arrow)"/>')
            if kind == "scroll" and action.get("direction") in ARROWS:
                dx, dy = ARROWS[action["direction"]]
                parts.append(f'<line x1="{x}" y1="{y}" x2="{x + dx}" y2="{y + dy}" stroke="{colour}" '
                             f'stroke-width="6" marker-end="url(#arrow)"/>')
            parts.append(f'<circle cx="{x}" cy="{y}" r="18" fill="none" stroke="{colour}" stroke-width="6" '
                         f'class="mark" data-action="{html.escape(str(kind))}"/>')
            parts.append(f'<text x="{x + 22}" y="{y - 22}" font-size="36" fill="{colour}" stroke="white" '
                         f'stroke-width="1.5">{number}</text>')
        else:  # typed text, keys, waits: a numbered label in the corner
            parts.append(f'<text x="12" y="{label_y}" font-size="34" fill="#111" stroke="white" stroke-width="2" '
                         f'class="mark" data-action="{html.escape(str(kind))}">{number}. '
                         f'{html.escape(action_label(action))[:60]}</text>')
            label_y += 42
    return "".join(parts)


def _screenshot(path: str | None, actions: Iterable[Mapping[str, Any]], base: str, rollouts: Path) -> str:
    if not path:
        return '<div class="noshot">no screenshot saved (run.save_screenshots: true keeps them)</div>'
    aspect = png_aspect(rollouts / path)
    return (f'<div class="shot"><img src="{html.escape(base + path)}" alt="screenshot">'
            f'<svg viewBox="0 0 1000 {round(1000 * aspect)}" preserveAspectRatio="none"><defs><marker id="arrow" '
            'markerWidth="6" markerHeight="6" refX="3" refY="3" orient="auto"><path d="M0,0 L6,3 L0,6 z"/></marker>'
            f"</defs>{action_marks(actions, aspect)}</svg></div>")


def _judgement(record: Mapping[str, Any]) -> str:
    j = record.get("judgement")
    if not j:
        return "not judged"
    details = j.get("details") or j.get("error") or ""
    text = f"score {j.get('score')} ({j.get('status')})"
    return text + (f"<pre>{html.escape(json.dumps(details, default=str)[:2000])}</pre>" if details else "")


def _recording(record: Mapping[str, Any], base: str) -> str:
    """The episode's screen recording (a path relative to the rollouts directory, or a URL), when one exists."""
    where = record.get("recording")
    if not where:
        return ""
    src = html.escape(str(where) if "://" in str(where) else base + str(where))
    video = f'<video controls preload="none" width="560" src="{src}"></video><br>' \
        if str(where).lower().endswith((".mp4", ".webm", ".ogg")) else ""
    return f'<p class="recording">{video}<a href="{src}">recording</a></p>'


def outcome(record: Mapping[str, Any]) -> str:
    return "success" if record.get("success") else "failure"


def episode_html(record: Mapping[str, Any], base: str, rollouts: Path, *, iteration: str = "") -> str:
    ok = bool(record.get("success"))
    dropped = record.get("screenshots_dropped")
    head = (f'<h3 class="{"ok" if ok else "fail"}">{html.escape(str(record.get("task_id")))} — '
            f'{outcome(record)}</h3><p>trajectory {html.escape(str(record.get("trajectory_id")))}, '
            f'status {html.escape(str(record.get("status")))}'
            + (f' ({html.escape(str(record.get("status_reason")))})' if record.get("status_reason") else "")
            + f', reward {record.get("reward")}'
            + (f', advantage {record.get("advantage")}' if record.get("advantage") is not None else "")
            + (f", {dropped} screenshots not kept (over run.screenshot_budget_mb)" if dropped else "") + "</p>"
            f"<p>judge: {_judgement(record)}</p>{_recording(record, base)}")
    turns, seen = [], record.get("initial_screenshot")
    for turn in record.get("turns", []):
        actions = turn.get("actions") or []
        parsed = (f'<p class="fail">parse error: {html.escape(str(turn["parse_error"]))}</p>' if turn.get("parse_error")
                  else "<p>actions: " + html.escape("; ".join(action_label(a) for a in actions) or "none") + "</p>")
        feedback = " ".join(str(f) for f in (turn.get("feedback"), turn.get("loop_feedback")) if f)
        turns.append(f'<div class="turn" data-turn="{turn.get("index")}">{_screenshot(seen, actions, base, rollouts)}<div>'
                     f'<b>turn {turn.get("index")}</b><pre>{html.escape(str(turn.get("response_text", "")))}</pre>'
                     f"{parsed}" + (f"<p>feedback: {html.escape(feedback)}</p>" if feedback else "") + "</div></div>")
        seen = turn.get("screenshot") or seen
    anchor = html.escape(str(record.get("trajectory_id")))
    return (f'<div class="episode filterable counted" id="{anchor}" data-task="{html.escape(str(record.get("task_id")))}" '
            f'data-outcome="{outcome(record)}" data-iteration="{html.escape(iteration)}">{head}{"".join(turns)}</div>')


def _filters(values: Mapping[str, Iterable[str]]) -> str:
    """Select boxes (key -> its values; one shows everything) and the count of what they leave shown."""
    boxes = []
    for key, options in values.items():
        opts = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in sorted(set(options)))
        boxes.append(f'<label>{key} <select class="filter" data-key="{key}"><option value="">all</option>{opts}'
                     "</select></label>")
    return f'<div class="filters">{" ".join(boxes)} — <span id="shown"></span> shown</div>'


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style><script>{SCRIPT}</script></head><body><h1>{html.escape(title)}</h1>{body}"
            "</body></html>\n")


def _rollout_files(run_dir: Path) -> list[Path]:
    rollouts = Path(run_dir) / "rollouts"
    files = sorted(rollouts.glob("*.jsonl")) if rollouts.is_dir() else []
    if not files:
        raise ScaleCUAError(f"{rollouts}: no rollout records (*.jsonl); a run writes them each iteration, "
                            "core.eval at its end")
    return files


def write_episode_pages(run_dir: Path) -> Path:
    """Write the pages into ``run_dir/report/episodes``; returns the index."""
    rollouts = Path(run_dir) / "rollouts"
    files = _rollout_files(run_dir)
    out = Path(run_dir) / "report" / "episodes"
    out.mkdir(parents=True, exist_ok=True)
    base = "../../rollouts/"  # screenshot paths in the records are relative to rollouts/
    rows, per_task, listing = [], defaultdict(lambda: [0, 0]), []
    for path in files:
        records = read_records(path)
        successes = sum(bool(r.get("success")) for r in records)
        for r in records:
            per_task[str(r.get("task_id"))][0] += bool(r.get("success"))
            per_task[str(r.get("task_id"))][1] += 1
        name = path.stem + ".html"
        filters = _filters({"task": [str(r.get("task_id")) for r in records], "outcome": ["success", "failure"]})
        (out / name).write_text(_page(f"{Path(run_dir).name}: {path.stem}", filters + "".join(
            episode_html(r, base, rollouts, iteration=path.stem) for r in records)), encoding="utf-8")
        rate = f"{successes / len(records):.0%}" if records else "-"
        rows.append(f'<tr><td><a href="{name}">{html.escape(path.stem)}</a></td><td>{len(records)}</td>'
                    f"<td>{successes}</td><td>{rate}</td></tr>")
        listing.extend(
            f'<tr class="filterable counted" data-task="{html.escape(str(r.get("task_id")))}" data-outcome="{outcome(r)}" '
            f'data-iteration="{html.escape(path.stem)}"><td>{html.escape(path.stem)}</td>'
            f'<td>{html.escape(str(r.get("task_id")))}</td><td class="{"ok" if r.get("success") else "fail"}">'
            f'{outcome(r)}</td><td>{r.get("reward")}</td><td>{len(r.get("turns") or [])}</td><td>'
            f'<a href="{name}#{html.escape(str(r.get("trajectory_id")))}">{html.escape(str(r.get("trajectory_id")))}'
            "</a></td></tr>" for r in records)
    tasks = "".join(f"<tr><td>{html.escape(t)}</td><td>{s}/{n}</td></tr>" for t, (s, n) in sorted(per_task.items()))
    filters = _filters({"task": list(per_task), "outcome": ["success", "failure"],
                        "iteration": [p.stem for p in files]})
    index = out / "index.html"
    index.write_text(_page(f"{Path(run_dir).name}: episodes",
                           "<h2>Rollout files</h2><table><tr><th>file</th><th>episodes</th><th>successes</th>"
                           f"<th>success rate</th></tr>{''.join(rows)}</table><h2>Tasks</h2><table><tr><th>task"
                           f"</th><th>successes / episodes</th></tr>{tasks}</table><h2>Episodes</h2>{filters}"
                           "<table><tr><th>file</th><th>task</th><th>outcome</th><th>reward</th><th>turns</th>"
                           f"<th>episode</th></tr>{''.join(listing)}</table>"), encoding="utf-8")
    return index


def write_compare_page(out: Path, columns: Mapping[str, Path], title: str) -> Path:
    """One page with each task's episodes of several runs side by side (``columns``: label -> run directory,
    e.g. the evaluate stage's before and after), filterable by task and outcome; screenshots by relative path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    by_task: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    rates: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for label, run_dir in columns.items():
        rollouts = Path(run_dir) / "rollouts"
        base = Path(_relative(rollouts, out.parent)).as_posix() + "/"
        for path in _rollout_files(run_dir):
            for r in read_records(path):
                task = str(r.get("task_id"))
                by_task[task][label].append(episode_html(r, base, rollouts, iteration=path.stem))
                rates[task][label][0] += bool(r.get("success"))
                rates[task][label][1] += 1
    labels = list(columns)
    grid = f'style="grid-template-columns:repeat({len(labels)},440px)"'
    rows = []
    for task in sorted(by_task):
        cells = "".join(f"<div><h2>{html.escape(label)}: {rates[task][label][0]}/{rates[task][label][1]}</h2>"
                        + "".join(by_task[task][label]) + "</div>" for label in labels)
        rows.append(f'<div class="row filterable" data-task="{html.escape(task)}"><h2>{html.escape(task)}</h2>'
                    f'<div class="compare" {grid}>{cells}</div></div>')
    filters = _filters({"task": list(by_task), "outcome": ["success", "failure"]})
    out.write_text(_page(title, filters + "".join(rows)), encoding="utf-8")
    return out


def _relative(target: Path, start: Path) -> str:
    return os.path.relpath(Path(target).resolve(), Path(start).resolve())
