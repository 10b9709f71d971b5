"""``python -m core.run --config FILE [KEY=VALUE ...] [--resume [RUN_DIR]]``: train.

Resolves the config and plugins, prepares the run directory (resolved config,
plugin versions, logs), then runs the training loop (:mod:`core.runtime.loop`).
"""

from __future__ import annotations

import sys
from typing import Sequence

import structlog

from core.runtime import logs, rundir
from core.commands.cli import config_parser, main_guard
from core.config import load_config

#: slots the training loop needs
REQUIRED_SLOTS = ("model", "environment", "sampler", "segmenter", "trainer", "rollout", "judge")


def main(argv: Sequence[str] | None = None, *, extra_plugins: Sequence[object] = ()) -> int:
    """``extra_plugins``: plugin objects registered for this run only (a launcher's placement plugin)."""
    parser = config_parser("python -m core.run", __doc__.splitlines()[0])
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="RUN_DIR",
        help="continue a run from its last checkpoint (default: the latest run with this name)",
    )
    parser.add_argument("--dry-run", action="store_true", help="validate and prepare the run directory only")
    args = parser.parse_args(argv)

    logs.configure()
    resolved, plugins = load_config(args.config, args.overrides, required=REQUIRED_SLOTS)
    for plugin in extra_plugins:
        plugins.register(plugin, name=type(plugin).__name__)
    run_dir = rundir.prepare(resolved, plugins, resume=args.resume, command="core.run")
    logs.configure(resolved.config.run.log_level, run_dir / "log.jsonl")
    logs.bind(run_id=run_dir.name)
    log = structlog.get_logger("core.run")
    log.info("run prepared", run_dir=str(run_dir), components={k: c.name for k, c in resolved.components.items()})
    if args.dry_run:
        print(run_dir)
        return 0

    from core.runtime.loop import train

    return train(resolved, plugins, run_dir, resume=bool(args.resume))


if __name__ == "__main__":
    sys.exit(main_guard(main))
