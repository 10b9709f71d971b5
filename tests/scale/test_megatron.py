"""The ``megatron`` backend's CPU-checkable parts.

megatron-core imports on CPU (Python 3.11 resolves 0.16.1); Megatron-Bridge does
not install here (it pins CUDA packages and transformers), so model building,
training steps and export run in ``bench/gpu_check.sh``. Checked here: the
registration and the missing-dependency error, vocabulary-parallel logprobs
(1 and 2 tensor-parallel gloo ranks) against :mod:`trainers.policy`, gradients
included, and the export renaming of Megatron-Bridge's own export names (its
mapping tables, read from its source: tests/scale/bridge_source.py) against the
real transformers model.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from core.config import AlgorithmSection
from core.errors import ScaleCUAError
from tests.scale import batch
from tests.scale.bridge_source import BridgeSource, export_names, shape_for
from tests.scale.vocab_parallel_worker import PADDED, SUPPRESSED, VOCAB, inputs
from trainers.megatron.logprobs import suppression_slice, vocab_parallel_logprobs
from trainers.megatron.names import expected_parameters, language_model_weights, to_transformers_name
from trainers.policy import policy_logprobs, suppression_mask


def _reference() -> tuple[torch.Tensor, torch.Tensor]:
    logits, targets, weights = inputs()
    logits = logits.clone().requires_grad_(True)
    mask = suppression_mask(PADDED, SUPPRESSED + list(range(VOCAB, PADDED)))
    logp = policy_logprobs(logits, targets, temperature=0.8, suppressed=mask)
    (weights * logp).sum().backward()
    return logp.detach(), logits.grad


def test_megatron_core_imports_without_a_gpu() -> None:
    import megatron.core
    from megatron.core.optimizer import OptimizerConfig

    assert megatron.core.__version__ and OptimizerConfig(optimizer="adam", use_distributed_optimizer=True)


def test_missing_bridge_names_the_extra(monkeypatch) -> None:
    from trainers.megatron.backend import MegatronTrainerOptions, create_megatron_trainer

    import megatron.core  # noqa: F401  (installed by the dev extra)

    # the Bridge made unimportable (None in sys.modules): the message is checked where it is installed too
    monkeypatch.setitem(sys.modules, "megatron.bridge", None)
    with pytest.raises(ScaleCUAError, match=r"scalecua\[megatron\]"):
        create_megatron_trainer(MegatronTrainerOptions(), model=batch.policy_model(), algorithm=AlgorithmSection())


def test_registered_as_megatron(plugins) -> None:
    options = plugins.registry("trainer").get("megatron").parse_options({"tensor_parallel_size": 4})
    assert options.tensor_parallel_size == 4 and options.distributed_optimizer and options.lr == 3e-6


def test_single_rank_logprobs_and_gradients_equal_the_policy_convention() -> None:
    expected, expected_grad = _reference()
    logits, targets, weights = inputs()
    logits.requires_grad_(True)
    logp = vocab_parallel_logprobs(logits, targets, temperature=0.8, vocab_start=0,
                                   suppressed=suppression_slice(SUPPRESSED, 0, PADDED, VOCAB))
    (weights * logp).sum().backward()
    torch.testing.assert_close(logp.detach(), expected)
    torch.testing.assert_close(logits.grad, expected_grad)


def test_two_tensor_parallel_ranks_equal_the_full_vocabulary(tmp_path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    worker = Path(__file__).with_name("vocab_parallel_worker.py")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
                           "127.0.0.1", "--master-port", str(port), str(worker), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected, expected_grad = _reference()
    grads = []
    for rank in range(2):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        torch.testing.assert_close(got["logp"], expected)  # every rank holds the full logprobs
        grads.append(got["grad"])
    torch.testing.assert_close(torch.cat(grads, dim=1), expected_grad)  # each rank: its slice of the gradient
    assert torch.all(expected_grad[:, VOCAB:] == 0) and torch.all(expected_grad[:, SUPPRESSED] == 0)


@pytest.mark.slow  # reads Megatron-Bridge's mapping tables: the first run downloads its wheel (~2 MB, cached)
def test_bridge_names_map_onto_the_transformers_model() -> None:
    model = batch.policy_model()
    expected = expected_parameters(model)
    vision = model.vision_parameter_prefixes()
    # the names Megatron-Bridge's own Qwen3-VL table gives the export (test_bridge_mappings.py: Qwen2.5-VL too)
    exported, _ = export_names(BridgeSource.locate(), "qwen3_vl", model.hf_config(), expected)
    stream = [(n, torch.empty(shape_for(n, expected, vision), device="meta")) for n in exported]
    got = dict(language_model_weights(stream, expected, vision))
    language = {n for n in expected if not n.startswith(vision)}
    assert set(got) == language  # vision dropped, tied lm_head dropped, every LM weight present
    assert to_transformers_name("model.layers.0.mlp.up_proj.weight") == "model.language_model.layers.0.mlp.up_proj.weight"
    with pytest.raises(KeyError, match="not a parameter"):
        list(language_model_weights([("model.layers.9.mlp.up_proj.weight", torch.zeros(1))], expected, ()))
    name = next(n for n in exported if to_transformers_name(n) in language)
    with pytest.raises(ValueError, match="shape"):
        list(language_model_weights([(name, torch.zeros(3, 3, 3))], expected, ()))
    with pytest.raises(KeyError, match="lacks"):
        list(language_model_weights(stream[:3], expected, vision))


class _ChunkStandIn(torch.nn.Module):
    """A SIMULATION of a Megatron model chunk: the tiny transformers model behind Megatron's forward signature
    (``input_ids``, ``position_ids``, ``attention_mask``, the vision inputs; logits out), because Megatron-Bridge
    builds the real chunk only where it installs (``bench/gpu_check.sh``)."""

    def __init__(self, module: torch.nn.Module, image_pad_id: int):
        super().__init__()
        self.module, self.image_pad_id = module, image_pad_id

    def forward(self, *, input_ids: torch.Tensor, position_ids: Any, attention_mask: Any, **vision: Any) -> Any:
        assert position_ids is None and attention_mask is None  # Megatron builds both itself (M-RoPE from the ids)
        types = (input_ids == self.image_pad_id).to(torch.int32)
        return self.module(input_ids=input_ids, mm_token_type_ids=types, **vision).logits


def test_recompute_logprobs_equal_the_torch_trainers() -> None:
    """``algorithm.old_logprobs: recompute`` on the megatron backend: the proximal logprobs of each segment
    (every rank computes every segment in the same order) equal the torch backend's on the same weights, 0
    where the loss mask is 0; without a reference model, asking for the reference's is an error."""
    from trainers.megatron.backend import MegatronTrainer
    from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

    model = batch.policy_model()
    segments = batch.segments(model.renderer())
    algorithm = AlgorithmSection(temperature=0.8)
    torch_trainer = TorchTrainer(TorchTrainerOptions(device="cpu"), model=model, algorithm=algorithm)
    expected = torch_trainer.recompute_logprobs(segments)
    megatron = object.__new__(MegatronTrainer)  # the parts recompute_logprobs uses, on one CPU rank
    megatron.__dict__.update(policy=model, device=torch.device("cpu"), algorithm=algorithm, tp_rank=0, tp_group=None,
                             real_vocab=model.vocab_size(), suppress_ids=model.suppressed_ids(), _mask_cache={},
                             model=[_ChunkStandIn(torch_trainer.model, model.renderer().image_pad_id)],
                             reference=None)
    got = megatron.recompute_logprobs(segments)
    assert [len(g) for g in got] == [len(s.input_ids) for s in segments]
    for seg, mine, theirs in zip(segments, got, expected, strict=True):
        torch.testing.assert_close(torch.tensor(mine), torch.tensor(theirs), atol=1e-4, rtol=1e-4)
        assert all(v == 0.0 for v, m in zip(mine, seg.loss_mask) if not m) and min(mine) < -0.1
    with pytest.raises(ValueError, match="no reference model"):
        megatron.recompute_logprobs(segments, reference=True)
