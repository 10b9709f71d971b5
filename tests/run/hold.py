"""A third-party observer plugin that holds a run at a known point until the test kills it.

It is a real ``*.dist-info`` on PYTHONPATH, found through the ``scalecua`` entry-point group like any
installed plugin. ``hook`` is ``episode_end`` (hold after the first judged episode of ``iteration``),
``checkpoint_saved`` (hold right after checkpoint ``iteration`` was written) or ``checkpoint_write`` (hold inside
the write of checkpoint ``iteration``: its files written, its COMPLETE marker not yet) or ``call:<module>.<function>``
(hold right after the ``iteration``-th call of that function returned). The plugin writes the
marker file atomically, then blocks, so a kill lands at that point by construction, not by timing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

PLUGIN = """
import os, time
from pathlib import Path
from core import hookimpl

HOOK = os.environ["SCALECUA_TEST_HOLD_HOOK"]
AT = int(os.environ["SCALECUA_TEST_HOLD_ITERATION"])
MARKER = Path(os.environ["SCALECUA_TEST_HOLD_MARKER"])


def _hold(what):
    partial = MARKER.with_suffix(".partial")
    partial.write_text(what)
    partial.rename(MARKER)  # atomic: the test never reads a half-written marker
    while True:
        time.sleep(60)


@hookimpl
def scalecua_episode_end(iteration, trajectory, run_dir):
    if HOOK == "episode_end" and iteration == AT:
        _hold(trajectory.trajectory_id)


@hookimpl
def scalecua_checkpoint_saved(iteration, path):
    if HOOK == "checkpoint_saved" and iteration == AT:
        _hold(str(path))


if HOOK == "checkpoint_write":  # inside the write: every file of the checkpoint but its COMPLETE marker
    import core.runtime.checkpoint as _ckpt

    _write_json = _ckpt._write_json

    def _holding_write_json(path, payload):
        if Path(path).name == _ckpt.COMPLETE_MARKER and payload.get("iteration") == AT:
            _hold(str(path))
        return _write_json(path, payload)

    _ckpt._write_json = _holding_write_json

if HOOK.startswith("call:"):  # at the AT-th call of a module-level function, e.g. call:core.commands.eval.write_rollouts
    import importlib

    _module, _, _name = HOOK[5:].rpartition(".")
    _target = importlib.import_module(_module)
    _original, _calls = getattr(_target, _name), []

    def _holding_call(*args, **kwargs):
        _calls.append(1)
        result = _original(*args, **kwargs)
        if len(_calls) == AT:
            _hold(HOOK)
        return result

    setattr(_target, _name, _holding_call)
"""


def hold_plugin(where: Path, *, hook: str, iteration: int) -> dict[str, str]:
    """The environment of a child process that loads the plugin; the marker is ``where / 'held'``."""
    where.mkdir(parents=True)
    (where / "scalecua_hold.py").write_text(PLUGIN)
    dist_info = where / "scalecua_hold-0.0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: scalecua-hold\nVersion: 0.0.1\n")
    (dist_info / "entry_points.txt").write_text("[scalecua]\nhold = scalecua_hold\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(where), *filter(None, [env.get("PYTHONPATH")])])
    env.update(SCALECUA_TEST_HOLD_HOOK=hook, SCALECUA_TEST_HOLD_ITERATION=str(iteration),
               SCALECUA_TEST_HOLD_MARKER=str(where / "held"))
    return env


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 600,
             child: subprocess.Popen | None = None) -> object:
    """Poll ``condition`` (an event, not a duration) until it holds; the timeout only bounds a hang."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if child is not None and child.poll() is not None:
            pytest.fail(f"the run exited (code {child.returncode}) before {what}")
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def run_cli(*args: str, env: dict | None = None, timeout: float = 1800) -> subprocess.CompletedProcess:
    """``python -m <args>`` in the repository root, output captured (the timeout only catches a hang)."""
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=Path(__file__).resolve().parents[2], env=env)


def only_run_dir(root: Path) -> Path:
    """The one run directory under ``root`` (a directory holding ``config.yaml``)."""
    dirs = [p for p in root.iterdir() if (p / "config.yaml").exists()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def kill_when_held(args: list[str], env: dict[str, str], what: str, timeout_s: float = 600) -> None:
    """Start ``python -m <args>`` with the hold plugin's ``env``, wait until it holds, then SIGKILL it."""
    import signal

    child = subprocess.Popen([sys.executable, "-m", *args], cwd=Path(__file__).resolve().parents[2], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(Path(env["SCALECUA_TEST_HOLD_MARKER"]).exists, what, timeout_s=timeout_s, child=child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
