"""Does the agent learn? The quickstart's recipe, run fresh, reported as one JSON object.

``python bench/learning.py [--quick] [--config FILE] [KEY=VALUE ...]`` runs ``python -m core.pipeline`` on
the config (default ``configs/quickstart.yaml``: warm start on recorded oracles -> refine -> RL ->
evaluate, on real desktops) in a fresh temporary output directory and prints one JSON object on stdout
(the recipe's own logs go to stderr):

* ``warm_start_success`` / ``post_rl_success``: ``core.eval`` on the RL pool, mean and std over passes,
  the warm-start checkpoint vs the final RL checkpoint on the same tasks and seeds; ``rl_gain`` and
  ``target_met`` (the quickstart's target: a gain of at least 0.15 absolute);
* ``rl``: training-batch success and informative-group share per RL iteration;
* ``stage_seconds``, ``wall_s`` and ``machine``; ``settings``: the overrides this run used.

``--quick`` (a smoke run of the whole path, not a learning measurement: 2 tasks, 2 warm-start epochs,
1 RL iteration, 1 evaluation pass) finishes in about a minute on 2 cores. Nothing is cached between runs:
every number comes from this run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_GAIN = 0.15
QUICK = ["tasks.include=[os-count-lines,os-make-executable]", "run.iterations=1", "run.checkpoint_every=1",
         "warm_start.epochs=2", "algorithm.batch_size=2", "algorithm.n_rollouts=2", "algorithm.max_turns=4",
         "recipe.refine.rollouts=1", "recipe.evaluate.passes=1", "environment.options.settle_s=0.0"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~1 minute smoke run (not a learning measurement)")
    parser.add_argument("--config", default=str(ROOT / "configs" / "quickstart.yaml"))
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = parser.parse_args()
    overrides = [*(QUICK if args.quick else []), *args.overrides]
    with tempfile.TemporaryDirectory(prefix="scalecua-learning-") as out:
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "core.pipeline", "--config", args.config,
                               f"run.output_dir={out}", *overrides],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
        wall = round(time.perf_counter() - started, 1)
        if proc.returncode != 0:
            print(json.dumps({"error": f"core.pipeline exited {proc.returncode}", "wall_s": wall}))
            return 1
        summaries = list(Path(out).glob("*/report/summary.json"))
        if len(summaries) != 1:
            print(json.dumps({"error": f"expected one report/summary.json under {out}, found {len(summaries)}"}))
            return 1
        summary = json.loads(summaries[0].read_text(encoding="utf-8"))
    gain = summary.get("rl_gain")
    result = {
        "benchmark": "learning", "quick": args.quick, "config": args.config, "settings": overrides,
        "machine": summary.get("machine"), "wall_s": wall, "stage_seconds": summary.get("stage_seconds"),
        "warm_start": summary.get("warm_start"),
        "warm_start_success": summary.get("warm_start_success"), "post_rl_success": summary.get("post_rl_success"),
        "rl_gain": gain, "target_gain": TARGET_GAIN,
        "target_met": None if gain is None else gain >= TARGET_GAIN,
        "rl": summary.get("rl"),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
