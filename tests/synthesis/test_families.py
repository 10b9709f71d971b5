"""The parametric task families: deterministic variants, disjoint splits, judges that pass the rule validator,
and, on real desktops through the real sandboxed judge, every family's oracle scoring 1 while its untouched
state, each of its near misses and a sibling variant's oracle score 0."""

from __future__ import annotations

import asyncio

import pytest

from core.errors import ConfigError
from core.interfaces import JudgeServices
from core.pluginmanager import load_plugins
from core.types import Action
from plugins.synthesis.families import CATALOG
from plugins.synthesis.families.spec import Family, commands
from plugins.synthesis.families.splits import PoolLayout, plan_variants
from plugins.synthesis.families.values import is_held_out
from plugins.synthesis.validator import RuleValidator, RuleValidatorOptions

LAYOUT = PoolLayout(train=6, validation=2, test=4, heldout=4)


def test_the_catalog_covers_the_bundled_kinds_infeasible_requests_and_long_tasks() -> None:
    kinds = {name: CATALOG.get(name).kind for name in CATALOG.names()}
    short = {"move-ext", "copy-ext", "delete-ext", "rename-ext", "count-lines", "grep-keyword", "sort-unique",
             "chmod", "symlink", "append-rc", "tar-folder"}
    assert short <= {n for n, k in kinds.items() if k == "short"}
    assert [n for n, k in kinds.items() if k == "infeasible"] == ["infeasible"]
    long = [n for n, k in kinds.items() if k == "long"]
    assert len(long) >= 3
    for name in CATALOG.names():
        assert len(CATALOG.get(name).paraphrases) >= 4, name  # three for training, one held out
    for variant in plan_variants(LAYOUT, seed=0):
        if variant.kind == "long":
            assert len(variant.oracle) >= 13  # 12 or more turns of commands, then done


def test_variants_are_deterministic_per_seed() -> None:
    first, again, other = (plan_variants(LAYOUT, seed=s) for s in (0, 0, 1))
    assert [v.task().to_json() for v in first] == [v.task().to_json() for v in again]
    assert sum(a.instruction != b.instruction for a, b in zip(first, other)) > len(first) // 2
    assert len({v.task_id for v in first}) == len(first)


def test_test_variants_use_only_held_out_values_and_held_out_families_stay_out_of_training() -> None:
    variants = plan_variants(LAYOUT, seed=3)
    for v in variants:
        for pool, values in v.values.items():
            assert all(is_held_out(pool, value) == (v.split == "test") for value in values), (v.task_id, pool)
    training = {v.family for v in variants if v.split in ("train", "validation", "test")}
    held = {v.family for v in variants if v.split == "heldout"}
    assert held == set(LAYOUT.heldout_families) and not held & training
    last = {name: len(CATALOG.get(name).paraphrases) - 1 for name in CATALOG.names()}
    assert not [v for v in variants if v.split in ("train", "validation") and v.paraphrase == last[v.family]]
    assert [v for v in variants if v.split == "test" and v.paraphrase == last[v.family]]


def test_the_oracle_uses_no_value_the_instruction_does_not_give() -> None:
    """What a policy must type is in the instruction (it can be read, not guessed); decoys and file contents,
    which the oracle never names, need not be."""
    for v in plan_variants(LAYOUT, seed=0):
        typed = " ".join(a.get("text", "") for a in v.oracle)
        for values in v.values.values():
            for value in values:
                if value in typed or value.upper() in typed:
                    assert value in v.instruction or value.upper() in v.instruction, (v.task_id, value)


def test_every_judge_passes_the_rule_validator() -> None:
    plugins = load_plugins(environ={})
    validator = RuleValidator(RuleValidatorOptions(allow_infeasible=True), getters=plugins.registry("getter"),
                              metrics=plugins.registry("metric"))
    for v in plan_variants(LAYOUT, seed=0):
        assert validator.validate(v.task()) == [], v.task_id
    strict = RuleValidator(RuleValidatorOptions(), getters=plugins.registry("getter"),
                           metrics=plugins.registry("metric"))
    infeasible = CATALOG.get("infeasible").variant("train", 0, 0).task()
    assert any("infeasible" in r for r in strict.validate(infeasible))


def test_a_template_that_does_not_render_names_the_template_and_the_field() -> None:
    class Broken(Family):
        name = "broken"
        paraphrases = ("Move ~/{src} to ~/{dest}.", "b {src}", "c {src}")

        def params(self, draw):
            return {"src": draw.one("word")}

        def setup(self, p):
            return "true"

        def oracle(self, p):
            return commands("true")

        def end_state(self, p):
            return []

        def near_misses(self, p):
            return {}

    with pytest.raises(ConfigError, match=r"family 'broken': paraphrase 0 \('Move ~/\{src\} to ~/\{dest\}\.'\) "
                                          r"does not render: field \{dest\} is not one of its parameters \(src\)"):
        Broken().render_instruction(0, {"src": "kanu"})


def test_an_unknown_family_is_named_with_the_alternatives() -> None:
    with pytest.raises(ConfigError, match="unknown task family 'move-extension'; the families are .*move-ext"):
        plan_variants(PoolLayout(families=("move-extension",)), seed=0)


# -- on real desktops -------------------------------------------------------------------------------------------


@pytest.mark.desktop
def test_on_a_desktop_every_oracle_scores_1_and_every_near_miss_0(tmp_path) -> None:
    from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions
    from tests.judges.conftest import make_executor

    variants = {name: CATALOG.get(name).variant("train", 1, 7) for name in CATALOG.names()}
    siblings = {name: CATALOG.get(name).variant("train", 2, 7) for name in CATALOG.names()}
    plugins = load_plugins(environ={})
    executor = make_executor()
    judge = JudgeServices.of(plugins, executor)
    pool = LocalDesktopBackend(LocalDesktopOptions(work_dir=str(tmp_path / "envs"), max_environments=2,
                                                   desktop_user=None, settle_s=0.2))
    failures: list[str] = []

    async def score(env, task, actions) -> float:
        await env.reset(task)
        actions = [Action.model_validate(a) for a in actions]
        for action in actions:
            if not action.is_terminal:
                await env.step(action)
        judged = await pool.evaluate(env, task, judge=judge, last_action=actions[-1] if actions else None)
        assert judged.status.value == "ok", (task.id, judged.error)
        return judged.score

    async def family(name: str) -> None:
        variant = variants[name]
        task = variant.task()
        runs = {"untouched": ([], 0.0), "oracle": (variant.oracle, 1.0),
                **{f"near miss {k!r}": (a, 0.0) for k, a in variant.near_misses.items()}}
        if variant.kind != "infeasible":  # every infeasible request is solved by the same fail
            runs["sibling's oracle"] = (siblings[name].oracle, 0.0)
        env = await pool.acquire()
        try:
            for label, (actions, want) in runs.items():
                got = await score(env, task, actions)
                if got != want:
                    failures.append(f"{name}: {label} scores {got}, not {want}")
        finally:
            await pool.release(env)

    async def body() -> None:
        try:
            await asyncio.gather(*(family(name) for name in CATALOG.names()))
        finally:
            await pool.close()
            await executor.close()

    asyncio.run(body())
    assert not failures, failures
