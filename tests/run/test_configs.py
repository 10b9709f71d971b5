"""Every shipped config validates against the installed plugins (the scale configs included: validating
them needs no GPU, vLLM or Megatron — heavy imports happen only when a component is created)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import load_config
from core.commands.run import REQUIRED_SLOTS

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
SYNTHESIS = {"synthesize", "families"}  # python -m core.synthesize configs (tests/synthesis validates them)
TRAINING = [c for c in CONFIGS if c.stem not in SYNTHESIS]


def test_configs_exist():
    assert {c.stem for c in CONFIGS} >= {"quickstart", "paper-osworld", "paper-scienceboard"} | SYNTHESIS


@pytest.mark.parametrize("path", [c for c in CONFIGS if c.stem in SYNTHESIS], ids=lambda p: p.stem)
def test_synthesis_configs_have_no_training_slots(path):
    """A synthesis config is told apart by its synthesis section; one that grew a trainer belongs in TRAINING."""
    text = path.read_text()
    assert "\nsynthesis:" in text and "\ntrainer:" not in text


@pytest.mark.parametrize("path", TRAINING, ids=lambda p: p.stem)
def test_training_configs_validate(path):
    resolved, _ = load_config(path, required=REQUIRED_SLOTS, environ={})
    assert set(resolved.components) >= set(REQUIRED_SLOTS)


def test_paper_osworld_matches_tables_10_and_11():
    resolved, _ = load_config(CONFIGS[0].parent / "paper-osworld.yaml", environ={})
    a = resolved.config.algorithm
    assert (a.batch_size, a.n_rollouts, a.max_turns, a.temperature) == (32, 8, 50, 0.8)
    assert (a.clip_low, a.clip_high, a.clip_c, a.kl_coef, a.incomplete_penalty) == (0.2, 0.28, 3.0, 1e-4, -0.2)
    assert resolved.options["segmenter"].keep_images == 5 and resolved.options["sampler"].sigma == 0.25
    assert resolved.options["rollout"].tensor_parallel_size == 2
    assert resolved.options["trainer"].tensor_parallel_size == 4
    from plugins.ray.options import RayOptions, plan_placement

    placement = plan_placement(RayOptions.from_extra(resolved.config.extra))
    assert (placement.rollout_workers * placement.rollout_gpus, placement.trainer_workers) == (16, 48)
