"""Run checkpoints: atomic directories, pruning, RNG and component round trips, kill-while-saving."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pytest
import structlog
import torch

from core.runtime.checkpoint import CheckpointManager, latest_complete, list_complete
from core.errors import CheckpointError
from core.interfaces import Sampler
from core.types import Task


class CountingSampler(Sampler):
    """A tiny seeded sampler (the Sampler ABC, real RNG state) for checkpoint tests."""

    def setup(self, tasks: Sequence[Task], *, seed: int) -> None:
        self.ids = [t.id for t in tasks]
        self.rng = random.Random(seed)
        self.seen: dict[str, int] = {}

    def select(self, iteration: int, batch_size: int) -> list[str]:
        return self.rng.sample(self.ids, batch_size)

    def observe(self, iteration: int, outcomes: Mapping[str, Sequence[float]]) -> None:
        for task_id, values in outcomes.items():
            self.seen[task_id] = self.seen.get(task_id, 0) + len(values)

    def state_dict(self) -> dict[str, Any]:
        version, internal, gauss = self.rng.getstate()
        return {"rng": [version, list(internal), gauss], "seen": self.seen, "ids": self.ids}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        version, internal, gauss = state["rng"]
        self.rng = random.Random()
        self.rng.setstate((version, tuple(internal), gauss))
        self.seen = dict(state["seen"])
        self.ids = list(state["ids"])


def _sampler(seed: int = 3) -> CountingSampler:
    sampler = CountingSampler()
    tasks = [Task(id=f"t{i}", instruction="x", evaluator={"func": "exact_match"}) for i in range(10)]
    sampler.setup(tasks, seed=seed)
    return sampler


def _draws() -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_round_trip_restores_rngs_sampler_and_components(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep=2)
    counter = {"value": 7}
    manager.register("counter", lambda: dict(counter), lambda s: counter.update(s))
    sampler = _sampler()
    sampler.select(0, 3)
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    path = manager.save(4, sampler=sampler)
    assert path == tmp_path / "checkpoints" / "iter_000004"
    assert (path / "COMPLETE").is_file()
    expected_draws = _draws()
    expected_batch = sampler.select(1, 3)

    counter["value"] = -1
    fresh = _sampler(seed=99)
    restored = CheckpointManager(tmp_path, keep=2)
    restored.register("counter", lambda: dict(counter), lambda s: counter.update(s))
    result = restored.load(sampler=fresh)
    assert result.iteration == 4 and result.path == path
    assert counter["value"] == 7
    assert _draws() == expected_draws
    assert fresh.select(1, 3) == expected_batch


def test_keeps_only_the_newest_checkpoints(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep=2)
    for iteration in (1, 2, 3, 4):
        manager.save(iteration)
    assert [p.name for p in list_complete(tmp_path)] == ["iter_000003", "iter_000004"]
    # re-saving an existing iteration replaces it in place
    manager.save(4)
    assert [p.name for p in list_complete(tmp_path)] == ["iter_000003", "iter_000004"]


def test_incomplete_checkpoints_are_ignored_with_a_warning(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    manager.save(1)
    broken = tmp_path / "checkpoints" / "iter_000002"
    broken.mkdir()
    (broken / "state.json").write_text("{}")
    with structlog.testing.capture_logs() as logs:
        assert latest_complete(tmp_path) == tmp_path / "checkpoints" / "iter_000001"
    assert any("incomplete" in entry["event"] and entry["path"] == str(broken) for entry in logs)
    with pytest.raises(CheckpointError, match="incomplete"):
        manager.load(broken)


def test_load_errors_name_the_problem(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    with pytest.raises(CheckpointError, match="no complete checkpoint"):
        manager.load()
    manager.save(1)
    with pytest.raises(CheckpointError, match="no sampler state"):
        manager.load(sampler=_sampler())
    other = CheckpointManager(tmp_path)
    other.register("queue", lambda: [], lambda s: None)
    with pytest.raises(CheckpointError, match="queue"):
        other.load()
    with pytest.raises(ValueError, match="twice"):
        other.register("queue", lambda: [], lambda s: None)
    bad = CheckpointManager(tmp_path)
    bad.register("obj", lambda: object(), lambda s: None)
    with pytest.raises(CheckpointError, match="not JSON-serializable"):
        bad.save(2)
    assert [p.name for p in list_complete(tmp_path)] == ["iter_000001"]


def test_kill_while_saving_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    """SIGKILL a process half-way through writing a checkpoint: the older one stays the latest."""
    ready = tmp_path / "ready"
    script = textwrap.dedent(f"""
        import threading
        from pathlib import Path
        from core.runtime.checkpoint import CheckpointManager

        manager = CheckpointManager({str(tmp_path)!r}, keep=3)
        phase = {{"slow": False}}

        def state():
            if phase["slow"]:
                Path({str(ready)!r}).write_text("x")
                threading.Event().wait()  # half-way through the save until the test kills this process
            return {{"n": 1}}

        manager.register("slow", state, lambda s: None)
        manager.save(1)
        phase["slow"] = True
        manager.save(2)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 300  # bounds a hang only
        while not ready.exists():
            assert proc.poll() is None, "the saving process died early"
            assert time.monotonic() < deadline, "the saving process never reached the second save"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:  # a failed check above: the process would otherwise wait forever
            proc.kill()
        proc.wait()
    leftovers = list((tmp_path / "checkpoints").glob(".tmp-*"))
    assert leftovers, "the killed save should have left its temporary directory behind"
    assert latest_complete(tmp_path) == tmp_path / "checkpoints" / "iter_000001"
    manager = CheckpointManager(tmp_path)
    manager.register("slow", lambda: {"n": 2}, lambda s: None)
    assert manager.load().components == {"slow": {"n": 1}}
    manager.save(2)  # a later save cleans the dead process's leftovers
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))
    assert json.loads((tmp_path / "checkpoints" / "iter_000002" / "state.json").read_text())["iteration"] == 2
