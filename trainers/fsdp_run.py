"""``torchrun --nproc-per-node N -m trainers.fsdp_run [--stage rl|warm_start] --config FILE [KEY=VALUE ...]``.

Trains with ``torch-fsdp``. Rank 0 runs the whole stage — ``python -m core.run``
(RL, the default) or ``python -m core.sft`` (``--stage warm_start``, the
cross-entropy objective on demonstrations): environments,
rollouts, judges. Its trainer is a :class:`DrivenTrainer`, which announces each
trainer call to the other ranks before taking part in it. The other ranks
build only the model and the trainer and :func:`follow` those announcements,
so every collective of a step runs on every rank. When rank 0's loop ends
(or fails) the followers are released and exit.

Rank 0 gets its :class:`DrivenTrainer` through the core's placement hook
(:class:`FSDPDriver`, registered for the one run), not through the factory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator, Sequence

import structlog

from core import hookimpl
from core.interfaces import TrainerBackend
from core.registry import instantiate
from core.types import Segment

log = structlog.get_logger(__name__)


def _announce(call: tuple[str, tuple[Any, ...]]) -> None:
    import torch.distributed as dist

    dist.broadcast_object_list([call], src=0)


class FSDPDriver:
    """Rank 0's placement plugin (``scalecua_place_component``): the ``torch-fsdp`` trainer the factory builds,
    wrapped as a :class:`DrivenTrainer` when other ranks follow; it also remembers whether they were released."""

    def __init__(self) -> None:
        self.closed = False

    @hookimpl
    def scalecua_place_component(self, slot: str, component: Any, options: Any, context: Any) -> Any:
        if slot != "trainer" or component.name != "torch-fsdp":
            return None
        trainer = instantiate(component, options, dict(context))
        return DrivenTrainer(trainer, self) if trainer.world_size > 1 else trainer

    def release(self) -> None:
        """Tell the followers to close (once)."""
        if not self.closed:
            _announce(("close", ()))
            self.closed = True


class DrivenTrainer(TrainerBackend):
    """Rank 0's trainer: every call is first broadcast so the followers make the same call."""

    def __init__(self, trainer: Any, driver: FSDPDriver) -> None:
        self.trainer = trainer
        self.driver = driver

    def train_step(self, segments: Sequence[Segment], kl_limit: float | None = None) -> dict[str, float]:
        _announce(("train_step", (list(segments), kl_limit)))
        return self.trainer.train_step(segments, kl_limit)

    def eval_step(self, segments: Sequence[Segment]) -> dict[str, float]:
        _announce(("eval_step", (list(segments),)))
        return self.trainer.eval_step(segments)

    def recompute_logprobs(self, segments: Sequence[Segment], *, reference: bool = False) -> list[list[float]]:
        _announce(("recompute_logprobs", (list(segments), reference)))
        return self.trainer.recompute_logprobs(segments, reference=reference)

    def export_weights(self, bucket_bytes: int = 256 << 20) -> Iterator[list[tuple[str, Any]]]:
        _announce(("export_weights", (bucket_bytes,)))
        return self.trainer.export_weights(bucket_bytes)

    def save(self, path: Path) -> None:
        _announce(("save", (str(path),)))
        self.trainer.save(path)

    def load(self, path: Path) -> None:
        _announce(("load", (str(path),)))
        self.trainer.load(path)

    def load_weights(self, path: Path) -> None:
        _announce(("load_weights", (str(path),)))
        self.trainer.load_weights(path)

    def close(self) -> None:
        self.driver.release()
        self.trainer.close()

    def __getattr__(self, name: str) -> Any:  # read-only attributes (steps, rank, options...)
        return getattr(self.trainer, name)


def follow(trainer: Any) -> None:
    """Rank > 0: make each call rank 0 announces, until it closes."""
    import torch.distributed as dist

    while True:
        box: list[Any] = [None]
        dist.broadcast_object_list(box, src=0)
        method, args = box[0]
        if method == "export_weights":
            for _ in trainer.export_weights(*args):  # each bucket is a gather: take part, keep nothing
                pass
        elif method == "close":
            trainer.close()
            return
        else:
            getattr(trainer, method)(*args)


def _follower_main(argv: Sequence[str]) -> int:
    from core.runtime import logs
    from core.commands.cli import config_parser
    from core.config import load_config

    stage, argv = _stage(argv)
    parser = config_parser("trainers.fsdp_run", "follower rank")
    parser.add_argument("--resume", nargs="?", const=True, default=None)
    args, _ = parser.parse_known_args(argv)
    logs.configure("warning")
    resolved, plugins = load_config(args.config, args.overrides, required=("model", "trainer"))
    if resolved.components["trainer"].name != "torch-fsdp":
        raise SystemExit(f"trainers.fsdp_run drives trainer 'torch-fsdp', but the config selects "
                         f"'{resolved.components['trainer'].name}'; set trainer.name: torch-fsdp")
    objective = "grpo"
    if stage == "warm_start":  # the same config rank 0's core.sft trains with
        from core.commands.sft import stage_config

        resolved, objective = stage_config(resolved, plugins), "cross_entropy"
    model = resolved.create("model", plugins, run_dir=Path(os.devnull))
    trainer = resolved.create("trainer", plugins, model=model, algorithm=resolved.config.algorithm,
                              seed=resolved.config.run.seed, objective=objective)
    follow(trainer)
    return 0


STAGES = {"rl": "core.run", "warm_start": "core.sft"}


def _stage(argv: Sequence[str]) -> tuple[str, list[str]]:
    """``--stage NAME`` (default rl) and the arguments left for the stage's own command line."""
    rest, stage = list(argv), "rl"
    if "--stage" in rest:
        i = rest.index("--stage")
        if i + 1 >= len(rest) or rest[i + 1] not in STAGES:
            raise SystemExit(f"trainers.fsdp_run: --stage takes one of {', '.join(STAGES)}")
        stage = rest[i + 1]
        del rest[i:i + 2]
    return stage, rest


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if int(os.environ.get("RANK", "0")) != 0:
        return _follower_main(argv)
    import importlib

    stage, argv = _stage(argv)
    from core.commands.cli import main_guard

    run_main = importlib.import_module(STAGES[stage]).main
    driver = FSDPDriver()
    code = 1
    try:
        code = main_guard(lambda args: run_main(args, extra_plugins=[driver]), argv)
    finally:
        _release_followers(driver)
    return code


def _release_followers(driver: FSDPDriver) -> None:
    """If rank 0 ends without closing its trainer (an error before or after the loop), free the followers."""
    import torch.distributed as dist

    if dist.is_initialized() and not driver.closed:
        try:
            driver.release()
        except Exception as exc:  # the group may already be broken
            log.warning("could not release the follower ranks", error=str(exc))


if __name__ == "__main__":
    sys.exit(main())
