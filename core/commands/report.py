"""``python -m core.report RUN_DIR``: PNG plots of a run.

Writes ``RUN_DIR/report/`` (:mod:`core.runtime.plots`: ``curves.png``, ``phases.png``,
``sampler_weights.png``, ``summary.json``). With ``--episodes`` also the trajectory viewer,
``RUN_DIR/report/episodes/`` (:mod:`core.runtime.episodes`; works for ``core.eval`` runs too).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from core.commands.cli import main_guard
from core.errors import ScaleCUAError
from core.runtime.plots import write_report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.report", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", action="store_true",
                        help="also write the trajectory viewer: report/episodes/index.html and a page per rollout file")
    args = parser.parse_args(argv)
    if (args.run_dir / "metrics.jsonl").is_file():
        print(json.dumps(write_report(args.run_dir), indent=2))
    elif not args.episodes:
        raise ScaleCUAError(f"{args.run_dir / 'metrics.jsonl'} does not exist; give a run directory (or "
                                "--episodes for a core.eval run, which has rollouts but no metrics)")
    if args.episodes:
        from core.runtime.episodes import write_episode_pages

        print(f"episodes: {write_episode_pages(args.run_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
