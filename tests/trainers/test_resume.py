"""Kill a training run (SIGKILL), resume it, and compare with a run that was never interrupted.

The run (``resume_driver.py``) uses the real ``frontier`` sampler, the real ``torch``
trainer on a tiny Qwen3-VL and run checkpoints; rewards come from the global
RNGs, so RNG restoration matters too. After resuming, the next batches, the
sampler state and the weights must be bitwise those of the uninterrupted run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.runtime.checkpoint import latest_complete

DRIVER = Path(__file__).with_name("resume_driver.py")
ITERATIONS = 4


def _run(run_dir: Path, record: Path, *extra: str) -> None:
    subprocess.run([sys.executable, str(DRIVER), str(run_dir), str(record), "--iterations", str(ITERATIONS), *extra],
                   check=True, timeout=300)


def _run_until_paused(run_dir: Path, record: Path, *extra: str) -> None:
    """Start the driver, wait until it pauses at the requested point, then SIGKILL it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(run_dir), str(record), "--iterations",
                             str(ITERATIONS), *extra])
    try:
        deadline = time.monotonic() + 300
        while not (run_dir / "paused").exists():
            assert proc.poll() is None, f"driver exited early with {proc.returncode}"
            assert time.monotonic() < deadline, "driver never reached the pause point"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:  # a failed check above: the paused driver would otherwise wait forever
            proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[Path, list[dict]]:
    root = tmp_path_factory.mktemp("uninterrupted")
    _run(root / "run", root / "record.jsonl")
    records = _records(root / "record.jsonl")
    assert [r["iteration"] for r in records] == list(range(ITERATIONS))
    return root / "run", records


@pytest.mark.slow
@pytest.mark.parametrize("kill_point", ["--pause-after", "--pause-before-save"])
def test_resumed_run_matches_the_uninterrupted_one(uninterrupted, tmp_path: Path, kill_point: str) -> None:
    reference_dir, reference = uninterrupted
    assert len({r["weights"] for r in reference}) == ITERATIONS  # the weights really move every iteration
    assert len({r["sampler"] for r in reference}) == ITERATIONS

    run_dir, record = tmp_path / "run", tmp_path / "record.jsonl"
    _run_until_paused(run_dir, record, kill_point, "2")
    before = _records(record)
    # killed after checkpoint 2, or after training iteration 2 but before its checkpoint: resume from 2 or 1
    resume_from = 2 if kill_point == "--pause-after" else 1
    assert latest_complete(run_dir).name == f"iter_{resume_from:06d}"
    assert before == reference[:resume_from]

    (run_dir / "paused").unlink()
    _run(run_dir, record, "--resume")
    after = _records(record)[resume_from:]
    assert [r["iteration"] for r in after] == list(range(resume_from, ITERATIONS))
    for got, want in zip(after, reference[resume_from:]):
        assert got["batch"] == want["batch"], "the next batch differs"
        assert got["rewards"] == want["rewards"], "RNG-drawn rewards differ"
        assert got["sampler"] == want["sampler"], "sampler state differs"
        assert got["weights"] == want["weights"], "weights differ"
        assert got["loss"] == want["loss"]
    final = latest_complete(run_dir)
    want = reference_dir / "checkpoints" / final.name
    assert (final / "sampler.json").read_bytes() == (want / "sampler.json").read_bytes()
    assert (final / "trainer" / "model.safetensors").read_bytes() == (want / "trainer" / "model.safetensors").read_bytes()
