"""``python -m core.pipeline --config FILE [KEY=VALUE ...] [--resume [RUN_DIR]]``: the paper's recipe, one command.

The stages of ``recipe.stages`` run in order, each a run directory of its own
under one recipe directory; a stage reads what earlier stages wrote, by path:

0. ``synthesize`` (when listed) — the task pool through VeriGen (:mod:`core.synthesize` on
   ``recipe.synthesize.config``) -> ``synthesize/pool/<split>/``, which ``pool:<split>`` task paths of
   the other stages name (``configs/families-rl.yaml``).
1. ``warm_start`` — supervised fine-tuning on demonstrations (:mod:`core.sft`)
   -> ``warm_start/checkpoints/iter_NNNNNN``.
2. ``refine`` — the warm-started model rolls out on a subset of the pool ->
   ``refine/rollouts/eval_000000.jsonl`` (with screenshots) and
   ``refine/pass_rates.json``; with a ``synthesis.proposer`` configured (an
   OpenAI-compatible endpoint), trajectory-guided synthesis turns them into new
   tasks -> ``refine/tasks/`` (added to the pool). Without one, synthesis is
   skipped with a message and the pool stays as it is.
3. ``rl`` — online RL (:mod:`core.runtime.loop`) from the warm start
   (``run.init_from``) on the refined pool, the sampler seeded with the
   measured pass rates (``tasks.pass_rates``) -> ``rl/``.
4. ``evaluate`` — the warm start and the final RL checkpoint on the RL pool
   or on each of ``recipe.evaluate.sets`` (``tasks.eval_sets``: a test split,
   a train sample), the same tasks and seeds, ``passes`` each, optionally a
   greedy pass and the floors (:mod:`core.commands.floors`) -> ``evaluate/before_after.json``
   and tables (per domain, per family).

``pipeline.json`` records each stage's status and outputs. ``--resume`` skips
completed stages and resumes the stage in progress from its own checkpoint
(warm start and RL checkpoint; refinement and evaluation are redone).
``report/summary.json`` gathers the numbers (see :mod:`core.commands.recipe_report`).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import structlog

from core.runtime import checkpoint, logs, rundir
from core.commands.cli import config_parser, main_guard
from core.config import ResolvedConfig, apply_overrides, load_config, load_raw, validate
from core.errors import ConfigError, ScaleCUAError
from core.pluginmanager import Plugins
from core.config.stages import RecipeSection
from core.runtime.demonstrations import DEMOS_PREFIX
from core.runtime.tasks import POOL_PREFIX, rooted, task_path_lists

log = structlog.get_logger(__name__)
STATE_FILE = "pipeline.json"
RL_SLOTS = ("model", "environment", "sampler", "segmenter", "trainer", "rollout", "judge")
EVAL_SLOTS = ("model", "environment", "segmenter", "rollout", "judge")


class StageInputMissing(ScaleCUAError):
    exit_code = 2


class Recipe:
    def __init__(self, resolved: ResolvedConfig, plugins: Plugins, root: Path) -> None:
        if resolved.config.recipe is None:
            raise ConfigError(["recipe: this config has no recipe section; add recipe: {stages: [warm_start, refine, "
                               "rl, evaluate]} (see configs/quickstart.yaml), or train one stage with core.run / "
                               "core.sft"])
        self.resolved, self.plugins, self.root = resolved, plugins, root
        self.recipe: RecipeSection = resolved.config.recipe
        self.state: dict[str, Any] = self._read_state()

    # -- state -------------------------------------------------------------------

    def _read_state(self) -> dict[str, Any]:
        path = self.root / STATE_FILE
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
        return {"stages": {}}

    def _write_state(self) -> None:
        rundir.write_json_atomic(self.root / STATE_FILE, self.state)

    def outputs(self, stage: str) -> dict[str, Any] | None:
        entry = self.state["stages"].get(stage)
        return entry["outputs"] if entry and entry.get("status") == "completed" else None

    def require(self, stage: str, key: str, consumer: str) -> Any:
        """An earlier stage's output, or an error naming the stage that should have produced it."""
        outputs = self.outputs(stage)
        value = outputs.get(key) if outputs else None
        if value is None or (isinstance(value, str) and not Path(value).exists()):
            raise StageInputMissing(
                f"stage '{consumer}' needs {key} from stage '{stage}', which "
                + ("has not completed" if outputs is None else "did not produce it" if value is None
                   else f"recorded {value!r} but it no longer exists")
                + f"; run stage '{stage}' (remove its entry from {self.root / STATE_FILE} to redo it)")
        return value

    # -- configs -----------------------------------------------------------------

    def stage_config(self, name: str, overrides: Mapping[str, Any], required: Sequence[str]) -> ResolvedConfig:
        raw = apply_overrides(self.resolved.raw, dict(overrides), where=f"recipe.{name}")
        return validate(self._pool_paths(raw, name), self.plugins, required=required, source=self.resolved.source)

    def _pool_paths(self, raw: dict[str, Any], consumer: str) -> dict[str, Any]:
        """``pool:<split>`` task paths -> the synthesize stage's exported ``pool/<split>``; ``demos:<split>``
        demonstration paths -> the demonstrations its checker kept of that split's tasks."""
        lists = list(task_path_lists(raw).values())
        demos = ((raw.get("warm_start") or {}).get("demonstrations") or {}).get("paths") or []
        named = [(paths, POOL_PREFIX, "pool") for paths in lists] + [(demos, DEMOS_PREFIX, "demonstrations")]
        if not any(str(p).startswith(prefix) for paths, prefix, _ in named for p in paths):
            return raw
        if "synthesize" not in self.recipe.stages:
            raise ConfigError([f"{POOL_PREFIX}<split> task paths and {DEMOS_PREFIX}<split> demonstration paths "
                               "name what the synthesize stage builds, which recipe.stages "
                               f"{self.recipe.stages} does not run; add it first"])
        for paths, prefix, output in named:
            if any(str(p).startswith(prefix) for p in paths):
                paths[:] = rooted(paths, prefix, Path(self.require("synthesize", output, consumer)))
        return raw

    # -- the run -------------------------------------------------------------------

    def run(self) -> int:
        for stage in self.recipe.stages:
            entry = self.state["stages"].get(stage, {})
            if entry.get("status") == "completed":
                log.info("stage already completed; skipped", stage=stage)
                continue
            started = time.perf_counter()
            self.state["stages"][stage] = {"status": "running", "outputs": {}}
            self._write_state()
            log.info("stage started", stage=stage)
            logs.bind(stage=stage)
            try:
                outputs = getattr(self, f"run_{stage}")(self.root / stage, resume=bool(entry))
            finally:
                logs.unbind("stage")
            if outputs is None:  # interrupted (Ctrl-C): the stage's own checkpoint was saved
                self.state["stages"][stage]["status"] = "interrupted"
                self._write_state()
                return 130
            self.state["stages"][stage] = {"status": "completed", "outputs": outputs,
                                           "seconds": round(time.perf_counter() - started, 1)}
            self._write_state()
            log.info("stage completed", stage=stage, seconds=self.state["stages"][stage]["seconds"])
        from core.commands.recipe_report import write_recipe_report

        summary = write_recipe_report(self.root, self.state)
        print(json.dumps(summary, indent=2))
        return 0

    def run_synthesize(self, where: Path, *, resume: bool) -> dict[str, Any]:
        """The pool through VeriGen (:mod:`core.synthesize`), exported by split to ``where/pool``; a resumed
        stage starts over (the synthesis store is not checkpointed across its export)."""
        from core.config.files import resolve_config_path
        from core.commands.synthesize import REQUIRED_SLOTS, check_roles, synthesize

        spec = self.recipe.synthesize
        assert spec is not None  # the recipe section's validator
        if where.exists():
            shutil.rmtree(where)
        source = Path(spec.config)
        base = self.resolved.source.parent if self.resolved.source else Path.cwd()
        path = resolve_config_path(base / source if not source.is_absolute() and (base / source).is_file()
                                   else spec.config)
        raw = apply_overrides(load_raw(path), {"run.seed": self.resolved.config.run.seed, **spec.overrides,
                                               "synthesis.pipeline.options.export_dir": str(where / "pool")},
                              where="recipe.synthesize")
        resolved = validate(raw, self.plugins, required=REQUIRED_SLOTS, source=path)
        check_roles(resolved)
        rundir.prepare_at(where, resolved, self.plugins)
        summary = asyncio.run(synthesize(resolved, self.plugins, where))
        rundir.write_json_atomic(where / "summary.json", summary)
        splits = {p.name: len(list(p.rglob("*.json"))) for p in sorted((where / "pool").iterdir()) if p.is_dir()} \
            if (where / "pool").is_dir() else {}
        if not splits:
            raise StageInputMissing(f"the synthesize stage accepted no task (see {where / 'summary.json'}); the "
                                    "later stages have no pool")
        log.info("pool synthesized", splits=splits, pool=str(where / "pool"))
        outputs = {"pool": str(where / "pool"), "splits": splits, "summary": str(where / "summary.json")}
        if (where / "demonstrations").is_dir():  # the checker's runs of accepted tasks, by split
            outputs["demonstrations"] = str(where / "demonstrations")
        return outputs

    def run_warm_start(self, where: Path, *, resume: bool) -> dict[str, Any]:
        from core.commands.sft import REQUIRED_SLOTS, WarmStart

        resolved = self.stage_config("warm_start", {"run.output_dir": str(self.root)}, REQUIRED_SLOTS)
        rundir.prepare_at(where, resolved, self.plugins)
        summary = asyncio.run(WarmStart(resolved, self.plugins, where).run(resume=resume))
        return {"checkpoint": summary["checkpoint"], "summary": str(where / "summary.json")}

    def _warm_checkpoint(self, consumer: str) -> str | None:
        if "warm_start" in self.recipe.stages:
            return self.require("warm_start", "checkpoint", consumer)
        return self.resolved.config.run.init_from

    def _pool_tasks(self, resolved: ResolvedConfig) -> list[Any]:
        from core.runtime.tasks import load_tasks

        backend_kind = resolved.create("environment", self.plugins, run_dir=None)
        try:
            base_dir = resolved.source.parent if resolved.source else None
            return load_tasks(resolved.config.tasks.paths, base_dir=base_dir, convert=backend_kind.convert_task,
                              include=resolved.config.tasks.include, domains=resolved.config.tasks.domains)
        finally:
            asyncio.run(backend_kind.close())

    def _pool_ids(self, resolved: ResolvedConfig) -> list[str]:
        return [t.id for t in self._pool_tasks(resolved)]

    def run_refine(self, where: Path, *, resume: bool) -> dict[str, Any]:
        from core.commands.eval import evaluate

        spec = self.recipe.refine
        if where.exists():
            shutil.rmtree(where)  # rollouts are not checkpointed: a resumed refinement starts over
        ckpt = self._warm_checkpoint("refine")
        base = self.stage_config("refine", spec.overrides, EVAL_SLOTS)
        pool = self._pool_ids(base)
        chosen = list(spec.tasks) if spec.tasks is not None else pool
        unknown = sorted(set(chosen) - set(pool))
        if unknown:
            raise ConfigError([f"recipe.refine.tasks: not in the pool: {unknown}"])
        if spec.max_tasks is not None and spec.max_tasks < len(chosen):
            picks = np.random.default_rng(base.config.run.seed).choice(len(chosen), spec.max_tasks, replace=False)
            chosen = [chosen[i] for i in sorted(picks.tolist())]
        resolved = self.stage_config("refine", {**spec.overrides, "tasks.include": chosen,
                                                "run.save_screenshots": True}, EVAL_SLOTS)
        rundir.prepare_at(where, resolved, self.plugins)
        result = asyncio.run(evaluate(resolved, self.plugins, where, ckpt=Path(ckpt) if ckpt else None,
                                      passes=spec.rollouts))
        rundir.write_json_atomic(where / "eval.json", result)
        rates = result["pass_rates"]
        rundir.write_json_atomic(where / "pass_rates.json", rates)
        outputs: dict[str, Any] = {"rollouts": str(where / "rollouts" / "eval_000000.jsonl"),
                                   "pass_rates": str(where / "pass_rates.json"), "eval": str(where / "eval.json"),
                                   "tasks": chosen, "tasks_dir": None, "synthesized": 0}
        if "synthesis.proposer" not in self.resolved.components:
            log.warning("trajectory-guided synthesis skipped: no synthesis.proposer is configured (it needs an "
                        "OpenAI-compatible endpoint; see configs/synthesize.yaml); the RL pool is the initial pool")
            return outputs
        outputs.update(self._synthesize(where, outputs))
        return outputs

    def _synthesize(self, where: Path, outputs: Mapping[str, Any]) -> dict[str, Any]:
        from core.commands.synthesize import check_roles, synthesize

        export = where / "tasks"
        overrides: dict[str, Any] = {
            "synthesis.proposer.options.rollouts": outputs["rollouts"],
            "synthesis.proposer.options.pass_rates": outputs["pass_rates"],
            "synthesis.proposer.options.tasks": list(self.resolved.config.tasks.paths),
            "synthesis.pipeline.options.export_dir": str(export),
        }
        if self.recipe.refine.synthesis_budget is not None:
            overrides["synthesis.pipeline.options.candidates"] = self.recipe.refine.synthesis_budget
        resolved = self.stage_config("refine", {**self.recipe.refine.overrides, **overrides},
                                     ("environment", "synthesis.proposer", "synthesis.pipeline"))
        check_roles(resolved)
        synth_dir = where / "synthesis"
        rundir.prepare_at(synth_dir, resolved, self.plugins)
        summary = asyncio.run(synthesize(resolved, self.plugins, synth_dir))
        rundir.write_json_atomic(synth_dir / "summary.json", summary)
        accepted = sorted(export.rglob("*.json")) if export.is_dir() else []
        log.info("trajectory-guided synthesis finished", accepted=len(accepted), export_dir=str(export))
        demos = synth_dir / "demonstrations"  # the accepted tasks' successful dry runs
        return {"tasks_dir": str(export) if accepted else None, "synthesized": len(accepted),
                "synthesis_summary": str(synth_dir / "summary.json"),
                "demonstrations": str(demos) if demos.is_dir() else None}

    def rl_overrides(self) -> dict[str, Any]:
        overrides = dict(self.recipe.rl.overrides)
        ckpt = self._warm_checkpoint("rl")
        if ckpt:
            overrides["run.init_from"] = ckpt
        if "refine" in self.recipe.stages:
            overrides["tasks.pass_rates"] = self.require("refine", "pass_rates", "rl")
            tasks_dir = self.outputs("refine")["tasks_dir"]  # type: ignore[index]
            if tasks_dir:
                overrides["tasks.paths"] = [*self.resolved.config.tasks.paths, tasks_dir]
        return overrides

    def run_rl(self, where: Path, *, resume: bool) -> dict[str, Any] | None:
        from core.runtime.loop import train

        resolved = self.stage_config("rl", self.rl_overrides(), RL_SLOTS)
        rundir.prepare_at(where, resolved, self.plugins)
        code = train(resolved, self.plugins, where, resume=resume and checkpoint.latest_complete(where) is not None)
        if code != 0:
            return None
        return {"checkpoint": str(checkpoint.latest_complete(where)), "metrics": str(where / "metrics.jsonl")}

    def run_control(self, where: Path, *, resume: bool) -> dict[str, Any]:
        """The SFT-only control: the warm start's run directory (checkpoint, log, recorded demonstrations) copied
        to ``where`` and resumed with more epochs, as many as RL's wall time buys at the warm start's pace."""
        from core.runtime.metrics import MetricsLog
        from core.commands.sft import REQUIRED_SLOTS, WarmStart

        warm_dir = self.root / "warm_start"
        self.require("warm_start", "checkpoint", "control")
        self.require("rl", "checkpoint", "control")
        epochs = self.resolved.config.warm_start.epochs
        extra = self.recipe.control.epochs
        step_seconds = sum(r.get("train/time/step", 0.0) for r in MetricsLog(warm_dir).read())
        rl_seconds = float(self.state["stages"]["rl"].get("seconds") or 0.0)
        if extra is None:
            extra = max(1, round(rl_seconds / (step_seconds / epochs))) if step_seconds > 0 else 1
        if where.exists():
            shutil.rmtree(where)  # redone whole: its start is the warm start's end
        shutil.copytree(warm_dir, where, ignore=shutil.ignore_patterns("log.jsonl"))
        resolved = self.stage_config("control", {"warm_start.epochs": epochs + extra}, REQUIRED_SLOTS)
        rundir.prepare_at(where, resolved, self.plugins)
        log.info("SFT-only control: the warm start continued", extra_epochs=extra, rl_seconds=rl_seconds,
                 warm_start_step_seconds=round(step_seconds, 1))
        summary = asyncio.run(WarmStart(resolved, self.plugins, where).run(resume=True))
        return {"checkpoint": summary["checkpoint"], "summary": str(where / "summary.json"), "extra_epochs": extra,
                "rl_seconds": rl_seconds, "warm_start_step_seconds": round(step_seconds, 1)}

    def _refine_as_before(self, before: str | None, resolved: ResolvedConfig) -> dict[str, Any] | None:
        """The refinement's rollouts *are* the "before" evaluation when they ran the same checkpoint on the same
        pool with the same passes, seed and overrides (then the episodes would be identical): reuse them."""
        refined = self.outputs("refine") if "refine" in self.recipe.stages else None
        if not refined or refined.get("synthesized") or not Path(refined["eval"]).is_file():
            return None
        result = json.loads(Path(refined["eval"]).read_text(encoding="utf-8"))
        same = (result.get("checkpoint") == before and result.get("passes") == self.recipe.evaluate.passes
                and result.get("seed") == resolved.config.run.seed
                and self.recipe.refine.overrides == self.recipe.evaluate.overrides
                and _same_pool(refined["tasks"], self._pool_ids(resolved)))
        if same:
            log.info("the refinement's rollouts are the 'before' evaluation (same checkpoint, pool, passes, seed)")
            return {**result, "reused_from": refined["eval"]}
        return None

    def run_evaluate(self, where: Path, *, resume: bool) -> dict[str, Any]:
        """Each set of ``recipe.evaluate.sets`` (default: the RL pool) from the warm start, the final RL
        checkpoint and the control (:func:`core.commands.recipe_evaluate.evaluate_sets`)."""
        from core.commands.recipe_evaluate import evaluate_sets

        spec = self.recipe.evaluate
        overrides = {k: v for k, v in self.rl_overrides().items() if k == "tasks.paths"}
        if spec.screenshots:
            overrides.update({"run.save_screenshots": True, "run.screenshot_max_side": spec.screenshot_max_side,
                              "run.screenshot_budget_mb": spec.screenshot_budget_mb})
        resolved = self.stage_config("evaluate", {**overrides, **spec.overrides}, EVAL_SLOTS)
        before = self._warm_checkpoint("evaluate")
        checkpoints = {
            "before": before,
            "after": self.require("rl", "checkpoint", "evaluate") if "rl" in self.recipe.stages else None,
            "control": self.require("control", "checkpoint", "evaluate") if "control" in self.recipe.stages else None,
        }
        return evaluate_sets(where, resolved, self.plugins, spec, checkpoints,
                             reused_before=lambda: self._refine_as_before(before, resolved),
                             train_tasks=lambda: self._pool_tasks(resolved))


def _same_pool(a: Any, b: Any) -> bool:
    return sorted(a) == sorted(b)


def recipe_dir(resolved: ResolvedConfig, plugins: Plugins, resume: str | bool | None) -> Path:
    name = (resolved.config.recipe.name if resolved.config.recipe else None) or resolved.config.run.name
    if resume:
        path = Path(resume) if not isinstance(resume, bool) else rundir.latest_run_dir(resolved.config.run.output_dir,
                                                                                       name)
        if path is not None:
            rundir.check_resume_command(path, "core.pipeline")
        if path is None or not (path / STATE_FILE).is_file():
            raise ConfigError([f"--resume: no recipe directory with a {STATE_FILE} at "
                               f"{path or resolved.config.run.output_dir + '/' + name + '-*'}"])
        if (path / "config.yaml").is_file():
            rundir.check_resume_config(path / "config.yaml", resolved.raw)
        return path
    path = rundir.new_run_dir(resolved.config.run.output_dir, name)
    (path / "config.yaml").write_text(resolved.to_yaml(), encoding="utf-8")
    rundir.write_json_atomic(path / "plugins.json", rundir.plugin_manifest(resolved, plugins))
    rundir.write_json_atomic(path / STATE_FILE, {"stages": {}})
    rundir.write_json_atomic(path / rundir.COMMAND_FILE, {"command": "core.pipeline"})
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = config_parser("python -m core.pipeline", __doc__.splitlines()[0])
    parser.add_argument("--resume", nargs="?", const=True, default=None, metavar="RUN_DIR",
                        help="continue a recipe where it stopped (default: the latest with this name)")
    args = parser.parse_args(argv)
    logs.configure()
    resolved, plugins = load_config(args.config, args.overrides)
    if resolved.config.recipe is None:
        Recipe(resolved, plugins, Path("."))  # raises the explanatory error
    root = recipe_dir(resolved, plugins, args.resume)
    logs.configure(resolved.config.run.log_level, root / "log.jsonl")
    logs.bind(run_id=root.name)
    log.info("recipe", root=str(root), stages=resolved.config.recipe.stages)  # type: ignore[union-attr]
    return Recipe(resolved, plugins, root).run()


if __name__ == "__main__":
    sys.exit(main_guard(main))
