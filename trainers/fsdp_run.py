"""``torchrun --nproc-per-node N -m trainers.fsdp_run --config FILE [KEY=VALUE ...]``: train with ``torch-fsdp``.

Rank 0 runs the whole training loop (``python -m core.run``): environments,
rollouts, judges. Its trainer is a :class:`DrivenTrainer`, which announces each
trainer call to the other ranks before taking part in it. The other ranks
build only the model and the trainer and :func:`follow` those announcements,
so every collective of a step runs on every rank. When rank 0's loop ends
(or fails) the followers are released and exit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterator, Sequence

import structlog

from core.types import Segment

log = structlog.get_logger(__name__)

#: set by this entry point on rank 0 so the factory wraps its trainer
DRIVER_ENV = "SCALECUA_FSDP_DRIVER"
_state = {"closed": False}


def _announce(call: tuple[str, tuple[Any, ...]]) -> None:
    import torch.distributed as dist

    dist.broadcast_object_list([call], src=0)


class DrivenTrainer:
    """Rank 0's trainer: every call is first broadcast so the followers make the same call."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer

    def train_step(self, segments: Sequence[Segment]) -> dict[str, float]:
        _announce(("train_step", (list(segments),)))
        return self.trainer.train_step(segments)

    def export_weights(self, bucket_bytes: int = 256 << 20) -> Iterator[list[tuple[str, Any]]]:
        _announce(("export_weights", (bucket_bytes,)))
        return self.trainer.export_weights(bucket_bytes)

    def save(self, path: Path) -> None:
        _announce(("save", (str(path),)))
        self.trainer.save(path)

    def load(self, path: Path) -> None:
        _announce(("load", (str(path),)))
        self.trainer.load(path)

    def close(self) -> None:
        if not _state["closed"]:
            _announce(("close", ()))
            _state["closed"] = True
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
    from core import logs
    from core.cli import config_parser
    from core.config import load_config

    parser = config_parser("trainers.fsdp_run", "follower rank")
    parser.add_argument("--resume", nargs="?", const=True, default=None)
    args, _ = parser.parse_known_args(argv)
    logs.configure("warning")
    resolved, plugins = load_config(args.config, args.overrides, required=("model", "trainer"))
    if resolved.components["trainer"].name != "torch-fsdp":
        raise SystemExit(f"trainers.fsdp_run drives trainer 'torch-fsdp', but the config selects "
                         f"'{resolved.components['trainer'].name}'; set trainer.name: torch-fsdp")
    model = resolved.create("model", plugins, run_dir=Path(os.devnull))
    trainer = resolved.create("trainer", plugins, model=model, algorithm=resolved.config.algorithm,
                              seed=resolved.config.run.seed)
    follow(trainer)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if int(os.environ.get("RANK", "0")) != 0:
        return _follower_main(argv)
    os.environ[DRIVER_ENV] = "1"
    from core.cli import main_guard
    from core.run import main as run_main

    code = 1
    try:
        code = main_guard(run_main, argv)
    finally:
        _release_followers()
    return code


def _release_followers() -> None:
    """If rank 0 ends without closing its trainer (an error before or after the loop), free the followers."""
    import torch.distributed as dist

    if dist.is_initialized() and not _state["closed"]:
        try:
            _announce(("close", ()))
            _state["closed"] = True
        except Exception as exc:  # the group may already be broken
            log.warning("could not release the follower ranks", error=str(exc))


if __name__ == "__main__":
    sys.exit(main())
