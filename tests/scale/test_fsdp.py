"""FSDP2 (``torch-fsdp``) on 2 CPU processes over gloo equals the single-process ``torch`` backend on the same batch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from core.config import AlgorithmSection
from tests.scale import batch
from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

WORKER = Path(__file__).with_name("fsdp_worker.py")
#: 5 segments -> 2 micro-batches: rank 1 also gets an idle round
# packed (the default): rows of 141+139 and 133+131+130 tokens, one micro-batch per rank
OPTIONS = {"micro_batch_tokens": 400, "adam_eps": batch.ADAM_EPS}
COMPARED = ("loss/tokens", "loss/pg", "loss/kl", "actor/approx_kl", "actor/ratio_mean", "actor/ratio_max",
            "actor/ratio_min", "actor/clipfrac_high", "actor/clipfrac_low", "actor/grad_norm")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _torchrun(out: Path, options: dict | str, nproc: int = 2) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1",
         "--master-port", str(_free_port()),
         str(WORKER), str(out), options if isinstance(options, str) else json.dumps(options)],
        capture_output=True, text=True, timeout=400, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.fixture(scope="module")
def fsdp_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fsdp")
    _torchrun(out, {**OPTIONS, "checkpoint": True})
    return out


@pytest.fixture(scope="module")
def single_process():
    torch.manual_seed(0)
    model = batch.policy_model()
    trainer = TorchTrainer(TorchTrainerOptions(device="cpu", lr=1e-3, **OPTIONS), model=model,
                           algorithm=AlgorithmSection(kl_coef=0.01))
    segments = batch.segments(model.renderer())
    metrics = [trainer.train_step(segments), trainer.train_step(segments)]
    weights = {name: t.clone() for bucket in trainer.export_weights() for name, t in bucket}
    third = trainer.train_step(segments)
    return metrics, weights, third


@pytest.mark.slow
def test_two_gloo_ranks_take_the_single_process_steps(fsdp_run, single_process) -> None:
    expected, expected_weights, _ = single_process
    got = json.loads((fsdp_run / "metrics.json").read_text())
    assert got[0]["dist/world_size"] == 2.0 and got[0]["batch/micro_batches"] == 2.0
    for step in range(2):
        for key in COMPARED:
            assert got[step][key] == pytest.approx(expected[step][key], rel=1e-4, abs=1e-6), (step, key)
    assert expected[1]["loss/pg"] != expected[0]["loss/pg"]  # the first step changed the policy
    weights = load_file(str(fsdp_run / "weights.safetensors"))
    assert set(weights) == set(expected_weights)
    for name, tensor in expected_weights.items():
        torch.testing.assert_close(weights[name], tensor, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.slow
def test_checkpoint_round_trip_continues_the_same_run(fsdp_run, single_process) -> None:
    _, _, third = single_process
    ckpt = fsdp_run / "ckpt"
    assert {"model.safetensors", "optimizer.pt", "trainer.json", "rng-0.pt", "rng-1.pt"} <= {
        p.name for p in ckpt.iterdir()}
    assert json.loads((ckpt / "trainer.json").read_text())["steps"] == 2
    again = json.loads((fsdp_run / "after_load.json").read_text())
    for key in COMPARED:
        assert again[key] == pytest.approx(third[key], rel=1e-4, abs=1e-6), key


@pytest.mark.slow
def test_rank_zero_drives_and_the_other_rank_follows(tmp_path, single_process) -> None:
    """trainers.fsdp_run's protocol: only rank 0 calls the trainer; rank 1 follows each announced call."""
    expected, expected_weights, _ = single_process
    _torchrun(tmp_path, "driven")
    assert (tmp_path / "driven.txt").read_text() == "DrivenTrainer"
    got = json.loads((tmp_path / "metrics.json").read_text())
    for step in range(2):
        assert got[step]["loss/pg"] == pytest.approx(expected[step]["loss/pg"], rel=1e-4)
    weights = load_file(str(tmp_path / "weights.safetensors"))
    for name, tensor in expected_weights.items():
        torch.testing.assert_close(weights[name], tensor, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.slow
def test_the_warm_start_objective_shards_the_same_way(tmp_path) -> None:
    """Cross-entropy (the warm start's objective) on two gloo ranks: the single-process steps and weights."""
    torch.manual_seed(0)
    model = batch.policy_model()
    trainer = TorchTrainer(TorchTrainerOptions(device="cpu", lr=1e-3, **OPTIONS), model=model,
                           algorithm=AlgorithmSection(kl_coef=0.01), objective="cross_entropy")
    segments = batch.segments(model.renderer())
    expected = [trainer.train_step(segments), trainer.train_step(segments)]
    expected_weights = {name: t.clone() for bucket in trainer.export_weights() for name, t in bucket}
    _torchrun(tmp_path, {**OPTIONS, "objective": "cross_entropy"})
    got = json.loads((tmp_path / "metrics.json").read_text())
    assert expected[1]["loss/nll"] < expected[0]["loss/nll"]
    for step in range(2):
        for key in ("loss/nll", "loss/tokens", "actor/grad_norm"):
            assert got[step][key] == pytest.approx(expected[step][key], rel=1e-4, abs=1e-6), (step, key)
    weights = load_file(str(tmp_path / "weights.safetensors"))
    for name, tensor in expected_weights.items():
        torch.testing.assert_close(weights[name], tensor, rtol=1e-4, atol=1e-6, msg=name)


def test_registered_as_torch_fsdp(plugins) -> None:
    component = plugins.registry("trainer").get("torch-fsdp")
    options = component.parse_options({"micro_batch_tokens": 2048, "reshard_after_forward": False})
    assert options.micro_batch_tokens == 2048 and options.lr == 3e-6


def test_without_a_process_group_the_error_says_how_to_start(monkeypatch) -> None:
    from trainers.fsdp import FSDPTrainer, FSDPTrainerOptions

    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        FSDPTrainer(FSDPTrainerOptions(device="cpu"), model=batch.policy_model(), algorithm=AlgorithmSection())
