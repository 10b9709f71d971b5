"""The plugin author's path, for real (issue 39): ``examples/scalecua-tally`` is a third-party package in its own
folder with its own ``pyproject.toml``. It is built into a wheel with ``python -m build``, installed with our own
wheel into a fresh virtual environment (its third-party dependencies, torch and the rest, come from this
interpreter's site-packages through a ``.pth`` line, so nothing is downloaded), listed by ``python -m core.plugins``,
selected by name in a training run and swapped in an ablation. Nothing of the source tree is importable there:
the commands run outside it, and the test checks that ``core`` and ``scalecua_tally`` load from the new venv.

The first tests drive the package's classes in this process (its folder on ``sys.path``)."""

from __future__ import annotations

import ast
import asyncio
import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from core.interfaces import JudgeServices
from core.registry import Registry
from core.types import Action, ActionType, Task

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "scalecua-tally"
COMPONENTS = ("environment", "sampler", "getter", "metric")


@pytest.fixture(scope="module")
def tally(tmp_path_factory):
    """The example's modules imported from its folder (no entry point involved)."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        from scalecua_tally import backend, judge, sampler

        yield backend, judge, sampler
    finally:
        sys.path.remove(str(EXAMPLE))
        for name in [n for n in sys.modules if n.startswith("scalecua_tally")]:
            del sys.modules[name]


def tasks() -> dict[str, Task]:
    out = {}
    for path in sorted((EXAMPLE / "scalecua_tally" / "tasks").glob("*.json")):
        task = Task.model_validate_json(path.read_text())
        out[task.id] = task
    return out


def services(judge) -> JudgeServices:
    getters, metrics = Registry("getter"), Registry("metric")
    getters.register("tally_value", judge.tally_value)
    metrics.register("tally_equals", judge.tally_equals)
    return JudgeServices(getters, metrics)


def click(button: str) -> Action:
    from scalecua_tally.app import BUTTONS

    x0, y0, x1, y1 = BUTTONS[button]
    return Action(type=ActionType.LEFT_CLICK, x=(x0 + x1) // 2, y=(y0 + y1) // 2)


def test_the_example_imports_only_the_contract_layer():
    offenders = []
    for path in sorted(EXAMPLE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                top = name.split(".")
                if top[0] in ("environments", "plugins", "samplers", "segmenters", "trainers"):
                    offenders.append(f"{path.name}: {name} (a built-in plugin package)")
                elif top[0] == "core" and len(top) > 1 and (top[1] in ("runtime", "commands")
                                                              or (ROOT / "core" / "commands" / f"{top[1]}.py").exists()):
                    offenders.append(f"{path.name}: {name} (not the contract layer)")
    assert not offenders, offenders


def test_an_episode_on_the_tally_is_judged_by_the_registered_getter_and_metric(tally):
    backend_mod, judge, _ = tally
    backend = backend_mod.create_backend(backend_mod.TallyOptions(max_environments=1))
    task = tasks()["tally-up-2-from-5"]  # 5 -> 7
    judged = services(judge)

    async def episode(actions: list[Action]) -> float:
        env = await backend.acquire()
        try:
            first = await env.reset(task)
            assert first.info["value"] == 5 and first.screenshot.width == 320
            last = None
            for action in actions:
                observation = await env.step(action)
                last = action
            verdict = await backend.evaluate(env, task, judge=judged, last_action=last)
            assert verdict.status.value == "ok", verdict.error
            return verdict.score
        finally:
            await backend.release(env)

    done = Action(type=ActionType.DONE)
    up = Action(type=ActionType.KEY, keys=["up"])
    assert asyncio.run(episode([click("plus"), up, done])) == 1.0
    assert asyncio.run(episode([click("plus"), up])) == 0.0                        # never said done
    assert asyncio.run(episode([click("plus"), click("plus"), up, done])) == 0.0    # one too many: 8
    assert asyncio.run(episode([click("minus"), click("minus"), done])) == 0.0     # the wrong way: 3
    assert asyncio.run(episode([done])) == 0.0                                      # untouched: 5
    assert asyncio.run(episode([click("reset"), done])) == 0.0


def test_the_backend_reads_back_what_it_writes_and_names_what_it_cannot_run(tally):
    backend_mod, _, _ = tally
    from core.errors import ActionParseError

    backend = backend_mod.create_backend(backend_mod.TallyOptions())
    actions = [click("plus"), Action(type=ActionType.KEY, keys=["down"]), Action(type=ActionType.DONE)]
    assert backend.parse_response(backend.format_response(actions)) == actions
    with pytest.raises(ActionParseError, match="no <tool_call>"):
        backend.parse_response("I would press plus")
    with pytest.raises(ActionParseError, match="unreadable tool call"):
        backend.parse_response('<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", '
                               '"coordinate": [5000, 1]}}</tool_call>')
    task = tasks()["tally-up-3"].model_copy(update={"config": []})
    task.config.append(type(tasks()["tally-up-3"].config[0])(type="open_app", parameters={}))
    assert backend.unsupported_steps(task) == ["open_app"]


def test_least_seen_draws_the_least_drawn_tasks_and_resumes_from_its_state(tally):
    _, _, sampler_mod = tally
    pool = list(tasks().values())

    def fresh():
        sampler = sampler_mod.LeastSeen(sampler_mod.LeastSeenOptions())
        sampler.setup(pool, seed=3)
        return sampler

    sampler = fresh()
    seen: list[str] = []
    for iteration in range(3):  # 3 x 3 = the pool of 9: every task exactly once
        batch = sampler.select(iteration, 3)
        sampler.observe(iteration, {task_id: [0.0, 1.0] for task_id in batch})
        seen += batch
    assert sorted(seen) == sorted(t.id for t in pool)
    state = json.loads(json.dumps(sampler.state_dict()))
    resumed = fresh()
    resumed.load_state_dict(state)
    assert resumed.select(3, 4) == sampler.select(3, 4)
    assert fresh().select(0, 3) == fresh().select(0, 3)  # seeded ties

    only_solved = sampler_mod.LeastSeen(sampler_mod.LeastSeenOptions(count_only_solved=True))
    only_solved.setup(pool, seed=3)
    first = only_solved.select(0, 2)
    only_solved.observe(0, {first[0]: [0.0, 0.0], first[1]: [1.0, 0.0]})
    assert first[0] in only_solved.select(1, len(pool) - 1) and first[1] not in only_solved.select(1, len(pool) - 1)


# -- the real thing: wheels, a fresh venv, our commands --------------------------------------------------------


def run(python: Path, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh venv's python, a work directory outside the source tree holding the example's configs)."""
    where = tmp_path_factory.mktemp("third-party")
    dist = where / "dist"
    source = where / "scalecua-tally"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "runs"))
    built = run(Path(sys.executable), "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(source),
                cwd=where)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    ours = run(Path(sys.executable), "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
               str(ROOT), cwd=where)
    assert ours.returncode == 0, ours.stderr[-2000:]
    wheels = sorted(p.name for p in dist.glob("*.whl"))
    assert [w.split("-")[0] for w in wheels] == ["scalecua", "scalecua_tally"], wheels

    venv = where / "venv"
    made = subprocess.run([sys._base_executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=where).stdout.strip())
    ours_site = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "scalecua-test-dependencies.pth").write_text("\n".join(sorted(ours_site)) + "\n")
    pip = run(python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", *map(str, dist.glob("*.whl")), cwd=where)
    assert pip.returncode == 0, pip.stderr[-2000:]

    work = where / "work"
    work.mkdir()
    for config in ("tally.yaml", "ablation.yaml"):
        shutil.copy(EXAMPLE / config, work / config)
    return python, work


@pytest.mark.slow
def test_the_installed_package_is_listed_beside_ours(installed):
    python, work = installed
    where = run(python, "-c", "import core, scalecua_tally; print(core.__file__); print(scalecua_tally.__file__)",
                cwd=work)
    venv = python.parent.parent
    assert all(Path(line).is_relative_to(venv) for line in where.stdout.split()), where.stdout
    listed = run(python, "-m", "core.plugins", cwd=work)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    for name in ("tally ", "least-seen", "tally_value", "tally_equals"):
        line = next((l for l in lines if l.strip().startswith(name)), None)
        assert line is not None and "scalecua-tally 0.1.0" in line, (name, listed.stdout)
    assert any(l.strip().startswith("frontier") and "scalecua 0.1.0" in l for l in lines)


@pytest.mark.slow
def test_a_run_selects_the_package_by_name(installed):
    python, work = installed
    proc = run(python, "-m", "core.run", "--config", "tally.yaml", "run.iterations=3", "run.output_dir=runs/run",
               cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (work / "runs" / "run").iterdir()
    selected = json.loads((run_dir / "plugins.json").read_text())["selected"]
    assert {slot: (c["name"], c["provider"]) for slot, c in selected.items() if c["provider"] != "scalecua"} == {
        "environment": ("tally", "scalecua-tally"), "sampler": ("least-seen", "scalecua-tally")}
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [0, 1, 2]
    assert [r["sampler/least_seen/max_draws"] for r in records] == [1.0, 1.0, 1.0]
    assert [r["sampler/least_seen/min_draws"] for r in records] == [0.0, 0.0, 1.0]
    # least-seen: three iterations of 3 tasks each cover the 9 tasks once
    drawn = []
    for rollouts in sorted((run_dir / "rollouts").glob("*.jsonl")):
        drawn += sorted({json.loads(line)["task_id"] for line in rollouts.read_text().splitlines()})
    assert sorted(drawn) == sorted(tasks()), drawn


@pytest.mark.slow
def test_an_ablation_swaps_the_package_sampler_for_built_in_ones(installed):
    python, work = installed
    proc = run(python, "-m", "core.ablate", "ablation.yaml", "run.output_dir=runs/ablate", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(next((work / "runs" / "ablate").rglob("ablation.json")).read_text())
    text = json.dumps(result)
    for sampler in ("least-seen", "uniform", "frontier"):
        assert f"sampler={sampler}" in text, text[:2000]
    assert "sampler=least-seen" in proc.stdout and proc.stdout.count("| ok ") == 3, proc.stdout
