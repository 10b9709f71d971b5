"""Benchmark: VeriGen on real local desktops with a scripted LLM — parallel throughput and the role ablation.

Prints ONE JSON object on stdout (logs go to stderr)::

    python bench/verigen.py [--quick] [--llm-latency 0.5] [--candidates 12]

The LLM is the scripted OpenAI-compatible server of the tests (``tests/synthesis/scripted_llm.py``), each
reply delayed by ``--llm-latency`` seconds to stand in for a hosted model's round trip. What the roles
*say* is therefore fixed by the script; what is measured is what the loop does with it: real desktops
(Xvfb + xterm), real setup steps, real actions, real judges in the sandbox executor.

Sections, variants side by side:

* ``parallel``: the same population of good candidates with N workers sharing M desktops — (1, 1),
  (4, 2) and (8, 2) (``--quick``: the first two); candidates per hour and mean end-to-end latency per candidate, and the speed-up
  over (1, 1). Desktop start-up is part of the wall time.
* ``ablation`` (the shape of the paper's Table 4): a population of four kinds — good; a judge that crashes
  when it runs (the scripted judger spots it); a judge with forbidden code (the rule validator spots it,
  the sandbox refuses to run it); a judge that scores the untouched start state 1 (only the dry run shows
  it; left out by ``--quick``) — through the full loop and with the judger, the fixer or the rule validator removed. Reported:
  executable rate of the judges that reach execution (first execution), acceptance, repairs (``--quick``: the full
  loop and without the fixer only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.runtime import logs  # noqa: E402
from core.pluginmanager import load_plugins  # noqa: E402
from core.interfaces import JudgeServices  # noqa: E402
from plugins.synthesis.pipeline import PipelineOptions, VeriGenPipeline  # noqa: E402
from tests.synthesis.helpers import (  # noqa: E402
    CRASHING_JUDGE,
    FILE_JUDGE,
    LENIENT_JUDGE,
    UNSAFE_JUDGE,
    act,
    fenced,
    file_task,
    llm_options,
    verdict,
)
from tests.synthesis.scripted_llm import Reply, Rule, ScriptedLLM  # noqa: E402

KINDS = {"good": FILE_JUDGE, "crash": CRASHING_JUDGE, "unsafe": UNSAFE_JUDGE, "lenient": LENIENT_JUDGE}
TARGET = re.compile(r"~/Documents/(k\d+)\.txt containing (k\d+)")


def candidate(index: int, kind: str) -> dict[str, Any]:
    name = f"k{index}"
    return file_task(f"Create ~/Documents/{name}.txt containing {name}.", path=f"~/Documents/{name}.txt", text=name,
                     code=KINDS[kind], suffix=f"{index:04d}")


def conversation(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages", []))


class Script:
    """The scripted roles: replies computed from the conversation, each delayed by ``latency``."""

    def __init__(self, kinds: list[str], latency: float):
        self.queue = [candidate(i, kind) for i, kind in enumerate(kinds)]
        self.latency = latency

    def reply(self, text: str) -> Reply:
        return Reply(text=text, delay_s=self.latency)

    def proposer(self, body: dict[str, Any]) -> Reply:
        return self.reply(fenced(self.queue.pop(0)))

    def judger(self, body: dict[str, Any]) -> Reply:
        if "no_such_key" in conversation(body):  # the reviewer notices the getter reads a key the config lacks
            return self.reply(verdict(False, 0.2, ("the getter reads config['no_such_key'], which is not set",)))
        return self.reply(verdict(True, 0.9))

    def fixer(self, body: dict[str, Any]) -> Reply:
        name = TARGET.search(conversation(body)).group(1)  # type: ignore[union-attr]
        return self.reply(fenced(candidate(int(name[1:]), "good")))

    def checker(self, body: dict[str, Any]) -> Reply:
        name = TARGET.search(conversation(body)).group(1)  # type: ignore[union-attr]
        turn = sum(m.get("role") == "assistant" for m in body.get("messages", []))
        if turn == 0:
            return self.reply(act({"type": "type", "text": f"echo {name} > ~/Documents/{name}.txt"},
                                  {"type": "key", "keys": ["Return"]}, {"type": "wait", "duration": 0.3}))
        return self.reply(act({"type": "done"}))

    def rules(self) -> list[Rule]:
        return [Rule(model=role, respond=getattr(self, role)) for role in ("proposer", "judger", "fixer", "checker")]


async def run_variant(plugins: Any, kinds: list[str], *, workers: int, desktops: int, latency: float,
                      roles: tuple[str, ...], work_dir: Path) -> dict[str, Any]:
    script = Script(kinds, latency)
    with ScriptedLLM(script.rules()) as server:
        registry = plugins.registry("synthesizer_role")
        ctx = {"getters": plugins.registry("getter"), "metrics": plugins.registry("metric")}
        made: dict[str, Any] = {"proposer": registry.create("llm-proposer", llm_options(
            server.base_url, "proposer", apps=["os"], candidates_per_job=1, observe=False), **ctx)}
        specs = {"validator": ("rule-validator", {}), "judger": ("llm-judger", llm_options(server.base_url, "judger")),
                 "checker": ("llm-checker", llm_options(server.base_url, "checker", max_steps=3)),
                 "fixer": ("llm-fixer", llm_options(server.base_url, "fixer"))}
        for role in roles:
            name, options = specs[role]
            made[role] = registry.create(name, options, **ctx)
        backend = plugins.registry("environment").create("local-desktop", {"max_environments": desktops},
                                                          run_dir=work_dir)
        executor = plugins.registry("judge_executor").create("sandbox", {})
        pipeline = VeriGenPipeline(
            PipelineOptions(candidates=len(kinds), workers=workers, environments=desktops, max_fix_rounds=1),
            roles=made, backend=backend, judge=JudgeServices(executor=executor, **ctx), run_dir=work_dir,
            run_id=work_dir.name)
        try:
            summary = await pipeline.run()
        finally:
            await pipeline.close()
            await executor.close()
            await backend.close()
    keys = ("candidates", "accepted", "rejected", "errors", "reached_execution", "executable_rate", "repairs",
            "rejected_by_stage", "mean_latency_s", "candidates_per_hour", "wall_s", "llm_calls")
    return {key: summary[key] for key in keys}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few candidates per variant (a smoke run)")
    parser.add_argument("--candidates", type=int, default=12, help="candidates per parallel variant")
    parser.add_argument("--ablation-repeats", type=int, default=2, help="copies of the 4-kind population")
    parser.add_argument("--llm-latency", type=float, default=0.5, help="seconds each scripted reply takes")
    args = parser.parse_args()
    logs.configure("warning")
    if args.quick:  # fewer candidates, two parallel variants, a smaller population (no start-state trap), two
        # ablation cells (the full loop and without the fixer)
        args.candidates, args.ablation_repeats = 3, 1
    plugins = load_plugins()
    started = time.monotonic()
    report: dict[str, Any] = {
        "bench": "verigen",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "settings": {"quick": args.quick, "candidates": args.candidates, "ablation_repeats": args.ablation_repeats,
                     "llm_latency_s": args.llm_latency, "app": "os (xterm)", "environment": "local-desktop",
                     "judge": "sandbox", "max_fix_rounds": 1},
    }
    with tempfile.TemporaryDirectory(prefix="bench-verigen-") as tmp:
        root = Path(tmp)
        everything = ("validator", "judger", "checker", "fixer")
        parallel = {}
        for workers, desktops in ((1, 1), (4, 2)) if args.quick else ((1, 1), (4, 2), (8, 2)):
            label = f"N{workers}_M{desktops}"
            print(f"parallel {label} ...", file=sys.stderr)
            parallel[label] = asyncio.run(run_variant(
                plugins, ["good"] * args.candidates, workers=workers, desktops=desktops, latency=args.llm_latency,
                roles=everything, work_dir=root / label))
        base = parallel["N1_M1"]["candidates_per_hour"] or 1.0
        report["parallel"] = parallel
        report["parallel_speedup_vs_N1_M1"] = {k: round(v["candidates_per_hour"] / base, 2)
                                               for k, v in parallel.items()}

        kinds = ["good", "crash", "unsafe"] if args.quick else ["good", "crash", "unsafe", "lenient"]
        population = kinds * args.ablation_repeats
        ablation = {}
        variants = (("full", None), ("without_judger", "judger"), ("without_fixer", "fixer"),
                    ("without_validator", "validator"))
        for label, removed in variants[::2] if args.quick else variants:  # quick: full and without the fixer
            print(f"ablation {label} ...", file=sys.stderr)
            ablation[label] = asyncio.run(run_variant(
                plugins, population, workers=4, desktops=2, latency=args.llm_latency,
                roles=tuple(r for r in everything if r != removed), work_dir=root / label))
        full = ablation["full"]["executable_rate"]
        report["ablation"] = ablation
        report["ablation_executable_rate_delta_vs_full"] = {
            k: (round(v["executable_rate"] - full, 4) if v["executable_rate"] is not None and full is not None
                else None) for k, v in ablation.items()}
    report["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
