"""The full-disk fault of ``bench/faults.py`` (``--mode disk``): a training run whose run directory lies on a small
tmpfs, filled up at seeded moments, freed, and resumed, again and again.

``bench/faults.py`` runs :func:`soak` in a private mount namespace (``unshare -m``, or ``unshare -rm`` without
root), so the tmpfs is this bench's alone and vanishes with it. Each fill starts a seeded 0-1.5 s after the run
has completed a seeded number (1 or 2) of further checkpoints and writes until the filesystem refuses (all of
it, or all but 512 KiB: then the small writes still go through and a checkpoint fails half-way). The run must stop on its own
with exit 1 and the one-line ``DiskFull`` error (naming the path and the free space, no traceback) within
``--disk-timeout`` seconds; the filler is removed and ``--resume`` continues. At the end the usual checks
(``bench.faults.check``): every iteration exactly once, no temporary file, no process left.
"""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

LEAVES = (0, 512 * 1024)  # bytes left free: nothing (the next write fails), or room for small records only


def fill(path: Path, leave: int) -> int:
    """Write ``path`` until the filesystem refuses, then give back ``leave`` bytes; the bytes written."""
    with path.open("wb", buffering=0) as handle:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    handle.write(b"\0" * size)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
        if leave:
            handle.truncate(max(handle.tell() - leave, 0))
        return handle.tell()


def complete_checkpoints(run_dir: Path) -> int:
    """The newest complete checkpoint's iteration (0: none); older ones are pruned, so not a count."""
    done = [int(p.parent.name.split("_")[1]) for p in (run_dir / "checkpoints").glob("iter_*/COMPLETE")] \
        if run_dir.is_dir() else []
    return max(done, default=0)


def soak(base: list[str], run_dir_of: Any, out: Path, *, fills: int, seed: int, timeout_s: float) -> dict[str, Any]:
    """Run ``base`` (a ``core.run`` command line) on ``out`` (a tmpfs) under ``fills`` full-disk faults."""
    rng = random.Random(seed)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    repo = Path(__file__).resolve().parents[2]
    faults: list[dict[str, Any]] = []
    started = time.perf_counter()
    command = list(base)
    attempt = 0
    while True:
        err = out.parent / f"disk-attempt-{attempt}.err"
        with err.open("w") as stderr:
            child = subprocess.Popen(command, cwd=repo, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        filled = None
        if len(faults) < fills:
            run_dir = run_dir_of()
            target = complete_checkpoints(run_dir) + rng.randint(1, 2)  # checkpoints are every iteration
            while child.poll() is None and complete_checkpoints(run_dir_of()) < target:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 1.5))  # anywhere in the next iteration: rollout records, metrics, checkpoint
            if child.poll() is None:
                leave = rng.choice(LEAVES)
                filled = {"kind": "full_disk", "at": time.time(), "leave_bytes": leave,
                          "after_checkpoints": complete_checkpoints(run_dir_of())}
                filled["bytes_written"] = fill(out / "filler", leave)
        try:
            code = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:  # a run that hangs on a full disk is a failure of the soak
            child.kill()
            code = child.wait()
            if filled is not None:
                filled["hung"] = True
        (out / "filler").unlink(missing_ok=True)
        text = err.read_text(errors="replace")
        if filled is None:
            return {"faults": faults, "returncode": code, "wall_s": time.perf_counter() - started,
                    "run_dir": run_dir_of(), "last_stderr": text[-2000:]}
        filled.update({"returncode": code, "clear_error": "no space left on the device" in text
                       and "free of" in text, "traceback": "Traceback" in text,
                       "message": next((line for line in text.splitlines() if line.startswith("error:")), "")[:300]})
        faults.append(filled)
        print(f"fault: full_disk (leave {filled['leave_bytes']} B) -> exit {code}", file=sys.stderr, flush=True)
        if code == 0:  # the run finished before the disk ran out: nothing left to resume
            return {"faults": faults, "returncode": code, "wall_s": time.perf_counter() - started,
                    "run_dir": run_dir_of(), "last_stderr": text[-2000:]}
        command = [*base, "--resume", str(run_dir_of())]
        attempt += 1


def verdicts(faults: list[dict[str, Any]]) -> dict[str, int]:
    """How each full disk ended: a clear stop (exit 1, the message, no traceback), a traceback, a hang, or a run
    that had already finished."""
    return {
        "clear_stop": sum(1 for f in faults if f["returncode"] == 1 and f["clear_error"] and not f["traceback"]),
        "traceback": sum(1 for f in faults if f["traceback"]),
        "hung": sum(1 for f in faults if f.get("hung")),
        "other_exit": sum(1 for f in faults if f["returncode"] not in (0, 1) and not f.get("hung")),
        "finished_anyway": sum(1 for f in faults if f["returncode"] == 0),
    }
