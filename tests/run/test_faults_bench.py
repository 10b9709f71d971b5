"""``bench/faults.py --quick``: a short training run (simulated desktops and policy: a SIMULATION) under step
failures, a trainer SIGKILL after checkpoint 2 and a checkpoint cut short before the resume; the soak's own
checks must hold (nothing lost, duplicated or left behind) and every fault kind must have been injected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_run_survives_the_quick_fault_schedule(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "faults.py"), "--quick", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    soak = result["modes"]["simulated"]
    assert result["survived_all"] and soak["survived"]
    assert soak["faults_injected"]["simulated_step_failure"] > 0
    assert soak["faults_injected"]["trainer_sigkill"] == 1 and soak["faults_injected"]["checkpoint_cut_short"] == 1
    assert soak["incomplete_checkpoints_ignored_on_resume"] >= 1  # the resume fell back past the cut checkpoint
    assert soak["iterations_lost"] == soak["iterations_duplicated"] == 0
    assert soak["episodes_scored_despite_environment_fault"] == 0
    assert not soak["processes_left"] and not soak["desktop_dirs_left"]
