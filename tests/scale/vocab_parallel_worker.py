"""One tensor-parallel rank (torchrun, gloo): vocab-parallel logprobs and their gradient on this rank's vocab slice.

Usage: ``torchrun --nproc-per-node 2 tests/scale/vocab_parallel_worker.py OUT_DIR``; each rank writes
``rank{r}.pt`` with its logprobs and the gradient of ``sum(w * logprobs)`` w.r.t. its logits slice.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from trainers.megatron.logprobs import suppression_slice, vocab_parallel_logprobs  # noqa: E402

VOCAB, PADDED, ROWS = 37, 40, 6  # real vocabulary 37, padded to 40 (Megatron pads to a TP multiple)
SUPPRESSED = [3, 21, 22]


def inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(ROWS, PADDED, generator=g) * 3
    targets = torch.tensor([0, 5, 19, 20, 36, 30])
    weights = torch.randn(ROWS, generator=g)
    return logits, targets, weights


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logits, targets, weights = inputs()
    local = PADDED // world
    start = rank * local
    shard = logits[:, start:start + local].clone().requires_grad_(True)
    mask = suppression_slice(SUPPRESSED, start, local, VOCAB)
    logp = vocab_parallel_logprobs(shard, targets, temperature=0.8, vocab_start=start, suppressed=mask,
                                   group=dist.group.WORLD)
    (weights * logp).sum().backward()
    torch.save({"logp": logp.detach(), "grad": shard.grad, "start": start}, Path(sys.argv[1]) / f"rank{rank}.pt")
    dist.barrier()  # leave together: a rank tearing gloo down while its peer still works can abort
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
