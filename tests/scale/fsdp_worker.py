"""One rank of the FSDP2 equality test (run by torchrun): two train steps, then every trained weight.

Usage: ``python -m torch.distributed.run --nproc-per-node N tests/scale/fsdp_worker.py OUT_DIR [OPTIONS_JSON]``.
Rank 0 writes ``metrics.json`` and ``weights.safetensors`` (full tensors gathered from the shards) to OUT_DIR.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from core.config import AlgorithmSection  # noqa: E402
from tests.scale import batch  # noqa: E402
from trainers.fsdp import FSDPTrainer, FSDPTrainerOptions  # noqa: E402


def driven(out: Path) -> None:
    """rank 0 drives through the placement plugin's DrivenTrainer; the other ranks follow (trainers.fsdp_run)."""
    import os

    from core.pluginmanager import load_plugins
    from trainers.fsdp_run import FSDPDriver, follow

    plugins = load_plugins(environ={})
    component = plugins.registry("trainer").get("torch-fsdp")
    options = FSDPTrainerOptions(device="cpu", lr=1e-3, micro_batch_tokens=700, adam_eps=batch.ADAM_EPS)
    model = batch.policy_model()
    context = {"model": model, "algorithm": AlgorithmSection(kl_coef=0.01)}
    if int(os.environ["RANK"]) != 0:  # torchrun's rank: the trainer initializes the process group
        follow(component.factory(options, **context))
        return
    trainer = FSDPDriver().scalecua_place_component(slot="trainer", component=component, options=options,
                                                     context=context)
    segments = batch.segments(model.renderer())
    metrics = [trainer.train_step(segments), trainer.train_step(segments)]
    weights = {name: t.clone() for bucket in trainer.export_weights(1 << 16) for name, t in bucket}
    trainer.close()
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    save_file(weights, str(out / "weights.safetensors"))
    (out / "driven.txt").write_text(type(trainer).__name__, encoding="utf-8")


def main() -> None:
    out = Path(sys.argv[1])
    if sys.argv[2:] == ["driven"]:
        torch.manual_seed(0)
        driven(out)
        leave()
    options = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    checkpoint = options.pop("checkpoint", False)
    objective = options.pop("objective", "grpo")
    torch.manual_seed(0)
    model = batch.policy_model()
    trainer = FSDPTrainer(FSDPTrainerOptions(device="cpu", lr=1e-3, **options), model=model,
                          algorithm=AlgorithmSection(kl_coef=0.01), objective=objective)
    segments = batch.segments(model.renderer())
    metrics = [trainer.train_step(segments), trainer.train_step(segments)]
    weights = {name: t.clone() for bucket in trainer.export_weights(1 << 16) for name, t in bucket}
    if trainer.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
        save_file(weights, str(out / "weights.safetensors"))
    if checkpoint:
        trainer.save(out / "ckpt")
        trainer.load(out / "ckpt")
        again = trainer.train_step(segments)
        if trainer.rank == 0:
            (out / "after_load.json").write_text(json.dumps(again), encoding="utf-8")
    leave()


def leave() -> None:
    """Leave together (a rank tearing gloo down while its peer still works can abort), then exit without the
    interpreter's finalization: gloo's worker threads torn down there abort now and then with "terminate called
    without an active exception", a joinable std::thread destroyed (seen once in CI, rank 1 of the cross-entropy
    case). Everything this worker reports is written and closed by now."""
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
