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


@pytest.mark.slow
def test_the_disk_mode_fills_the_disk_and_every_fill_is_a_clean_stop_then_a_resume(tmp_path: Path) -> None:
    """``--mode disk``: the run directory on a 96 MiB tmpfs in a private mount namespace, filled twice at seeded
    moments; each fill must end the run with the one-line full-disk error (exit 1, no traceback, no hang), and the
    resumes must leave every iteration exactly once and no temporary file."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / "faults.py"), "--mode", "disk", "--iterations", "8",
                           "--disk-fills", "2", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    soak = json.loads(done.stdout)["modes"]["disk"]
    assert soak["survived"], soak
    assert soak["faults_injected"] == {"full_disk": 2}
    assert soak["full_disk_ends"] == {"clear_stop": 2, "traceback": 0, "hung": 0, "other_exit": 0,
                                      "finished_anyway": 0}
    assert all("no space left on the device writing" in f["message"] and " MiB free of 96.0 MiB" in f["message"]
               for f in soak["faults"])
    assert soak["iterations_lost"] == soak["iterations_duplicated"] == 0 and not soak["temporary_files_left"]


@pytest.mark.slow
@pytest.mark.containers
def test_the_containers_mode_kills_and_pauses_desktop_containers_and_nothing_is_lost_or_left(tmp_path: Path) -> None:
    """``--mode containers``: the quickstart on container-desktop (the minimal image, podman behind its Docker API
    socket), desktop containers killed (``podman kill``) and paused while episodes run, the trainer SIGKILLed
    and resumed past a cut checkpoint: every iteration once, no episode scored on a killed or frozen container, no
    container left."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / "faults.py"), "--mode", "containers", "--iterations",
                           "4", "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    soak = json.loads(done.stdout)["modes"]["containers"]
    assert soak["survived"], {k: v for k, v in soak.items() if k != "faults"}
    injected = soak["faults_injected"]
    assert injected.get("container_kill", 0) + injected.get("container_pause", 0) > 0, injected
    assert injected["trainer_sigkill"] == 1 and soak["incomplete_checkpoints_ignored_on_resume"] >= 1
    assert soak["iterations_lost"] == soak["iterations_duplicated"] == 0
    assert soak["episodes_scored_despite_environment_fault"] == 0 and soak["containers_left"] == []


@pytest.mark.slow
def test_the_serving_mode_restarts_the_rollout_server_and_every_restart_is_noticed_and_restored(tmp_path: Path) -> None:
    """``--mode serving``: the tiny policy served by ``python -m plugins.serving`` (a real server process), the
    run generating through the openai-compatible engine on simulated desktops; the server SIGKILLed and started
    again on its port while requests are in flight. Each restart must be noticed, the weights pushed again, and
    no rollout or iteration lost."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / "faults.py"), "--mode", "serving", "--iterations", "6",
                           "--serving-interval", "1.0", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    soak = json.loads(done.stdout)["modes"]["serving"]
    assert soak["survived"], {k: v for k, v in soak.items() if k != "faults"}
    assert soak["server_restarts"] >= 1 and soak["server_restarts_noticed"] == soak["server_restarts"]
    # a restart met by a generation is refused and restored; one met first by a push needs no restore
    assert soak["weight_restores_in_metrics"] == soak["weight_restores_logged"] <= soak["server_restarts"]
    assert soak["generations_refused"] >= soak["weight_restores_in_metrics"]
    assert soak["iterations_lost"] == soak["iterations_duplicated"] == soak["lost_rollouts"] == 0


@pytest.mark.slow
def test_the_ray_mode_kills_environment_workers_and_their_episodes_are_retried(tmp_path: Path) -> None:
    """``--mode ray``: ``python -m plugins.ray.run`` on a local Ray instance (2 CPUs) with two environment
    workers (simulated desktops), a worker's process SIGKILLed while it holds episodes; Ray restarts it with an
    empty pool, the episodes it held end as environment faults and are retried: nothing lost or left."""
    pytest.importorskip("ray")
    done = subprocess.run([sys.executable, str(REPO / "bench" / "faults.py"), "--mode", "ray", "--iterations", "8",
                           "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    soak = json.loads(done.stdout)["modes"]["ray"]
    assert soak["survived"], {k: v for k, v in soak.items() if k != "faults"}
    # a kill between episodes costs none (acquires wait for the restart); one during them, retries
    assert soak["faults_injected"]["ray_env_worker"] >= 1
    assert soak["iterations_lost"] == soak["iterations_duplicated"] == soak["lost_rollouts"] == 0
    assert soak["ray_workers_left"] == []
