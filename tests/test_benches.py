"""Every benchmark's ``--quick`` run on this machine, as CI runs it: exit 0, and one JSON object on stdout that
states the machine and the settings (``bench/gpu_check.py`` needs a GPU: bench/gpu_check.sh runs it there).

Each bench is its own case, so a broken one is named; the quick modes take under a minute each (the suite's
budget: README, Development)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEEDS_A_GPU = {"gpu_check"}
BENCHES = sorted(p for p in (ROOT / "bench").glob("*.py") if p.stem not in NEEDS_A_GPU)


def test_every_bench_is_covered() -> None:
    assert len(BENCHES) >= 14 and all("--quick" in p.read_text() for p in BENCHES)


@pytest.mark.slow
@pytest.mark.desktop
@pytest.mark.parametrize("bench", BENCHES, ids=lambda p: p.stem)
def test_quick_mode_prints_one_json_object_with_machine_and_settings(bench: Path) -> None:
    proc = subprocess.run([sys.executable, str(bench), "--quick"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, f"{bench.name} --quick exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{bench.name} --quick did not print one JSON object on stdout ({exc}): {proc.stdout[:500]!r}")
    assert isinstance(result, dict)
    assert result.get("machine"), f"{bench.name}: no machine in its JSON (keys: {sorted(result)})"
    assert "settings" in result, f"{bench.name}: no settings in its JSON (keys: {sorted(result)})"
