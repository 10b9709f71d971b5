"""``python -m core.synthesize --config FILE [KEY=VALUE ...]``: synthesize verifiable tasks (VeriGen).

The config names one component per role under ``synthesis:`` — ``proposer``,
``validator``, ``judger``, ``checker``, ``fixer`` (``null`` or absent removes
a role: the paper's role ablation) — and the loop under
``synthesis.pipeline``; the ``environment`` and ``judge`` slots give the
desktops and the judge executor the checker runs candidates with. Every
candidate lands in the pipeline's task store; accepted tasks are exported as
OSWorld JSON files that ``tasks.paths`` of a training run can load.

Prints a progress bar on stderr and, at the end, one JSON summary on stdout
(also written to ``<run_dir>/summary.json``): candidates, accepted,
executable rate, mean latency per candidate, tokens and cost per accepted task.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import structlog

from core.runtime import logs, rundir
from core.commands.cli import config_parser, main_guard
from core.config import ResolvedConfig, load_config
from core.kinds import SYNTHESIS_ROLES
from core.errors import ConfigError
from core.interfaces import JudgeServices
from core.pluginmanager import Plugins

ROLES = SYNTHESIS_ROLES
SLOTS = (*ROLES, "pipeline")
REQUIRED_SLOTS = ("synthesis.proposer", "synthesis.pipeline")

log = structlog.get_logger("core.synthesize")


class ProgressBar:
    """tqdm on stderr: candidates decided out of those planned, with running counts."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.bar: Any = None
        self.counts = {"accepted": 0, "rejected": 0, "error": 0}

    def start(self, total: int) -> None:
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="candidates", unit="cand", file=sys.stderr, dynamic_ncols=True)

    def update(self, row: Any) -> None:
        status = getattr(row, "status", "error")
        self.counts[status] = self.counts.get(status, 0) + 1
        if self.bar is not None:
            if self.bar.n >= self.bar.total:
                self.bar.total = self.bar.n + 1  # derived jobs may yield more candidates than planned
            self.bar.set_postfix(self.counts, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def check_roles(resolved: ResolvedConfig) -> None:
    section = resolved.raw.get("synthesis") or {}
    unknown = [key for key in section if key not in SLOTS]
    if unknown:
        raise ConfigError([f"synthesis.{key}: unknown role; the roles are {', '.join(SLOTS)} (null disables one)"
                           for key in unknown])


async def synthesize(resolved: ResolvedConfig, plugins: Plugins, run_dir: Path, progress: Any = None) -> dict[str, Any]:
    """Create the roles, desktops and judge executor, run the pipeline, return its summary."""
    seed = resolved.config.run.seed
    base_dir = resolved.source.parent if resolved.source else None
    getters, metrics = plugins.registry("getter"), plugins.registry("metric")
    roles: dict[str, Any] = {}
    backend = executor = pipeline = None
    try:
        for role in ROLES:
            if f"synthesis.{role}" in resolved.components:
                roles[role] = resolved.create(f"synthesis.{role}", plugins, run_dir=run_dir, seed=seed,
                                              base_dir=base_dir, getters=getters, metrics=metrics)
        if "environment" in resolved.components:
            backend = resolved.create("environment", plugins, run_dir=run_dir)
        if "judge" in resolved.components:
            executor = resolved.create("judge", plugins)
        names = {role: resolved.components[f"synthesis.{role}"].name if role in roles else None for role in ROLES}
        pipeline = resolved.create(
            "synthesis.pipeline", plugins, roles=roles, backend=backend,
            judge=JudgeServices(getters, metrics, executor), run_dir=run_dir,
            run_id=run_dir.name, role_names=names, seed=seed,
        )
        return await pipeline.run(progress=progress)
    finally:
        if pipeline is not None:
            await pipeline.close()
        else:
            for role in roles.values():
                if hasattr(role, "close"):
                    await role.close()
        if executor is not None:
            await executor.close()
        if backend is not None:
            await backend.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = config_parser("python -m core.synthesize", __doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="validate and prepare the run directory only")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    args = parser.parse_args(argv)

    logs.configure()
    resolved, plugins = load_config(args.config, args.overrides, required=REQUIRED_SLOTS)
    check_roles(resolved)
    run_dir = rundir.prepare(resolved, plugins, command="core.synthesize")
    logs.configure(resolved.config.run.log_level, run_dir / "log.jsonl")
    logs.bind(run_id=run_dir.name)
    log.info("synthesis prepared", run_dir=str(run_dir),
             components={k: c.name for k, c in resolved.components.items()})
    if args.dry_run:
        print(run_dir)
        return 0
    progress = ProgressBar(enabled=not args.no_progress)
    try:
        summary = asyncio.run(synthesize(resolved, plugins, run_dir, progress))
    finally:
        progress.close()
    summary["run_dir"] = str(run_dir)
    rundir.write_json_atomic(run_dir / "summary.json", summary)
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
