"""The paper's ScienceBoard configuration and its CPU variant validate against the installed plugins."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import load_config
from core.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
PAPER, CPU = CONFIGS / "paper-scienceboard.yaml", CONFIGS / "paper-scienceboard-cpu.yaml"


def test_the_paper_configuration_has_table_10_and_11s_scienceboard_values() -> None:
    resolved, _ = load_config(PAPER, environ={})
    c, o = resolved.config, resolved.options
    assert (c.algorithm.batch_size, c.algorithm.n_rollouts, c.algorithm.max_turns) == (16, 8, 50)
    assert (c.algorithm.clip_low, c.algorithm.clip_high, c.algorithm.clip_c) == (0.2, 0.28, 3.0)
    assert (c.algorithm.kl_coef, c.algorithm.temperature, c.algorithm.incomplete_penalty) == (1e-4, 0.8, -0.2)
    assert (o["sampler"].mu, o["sampler"].sigma, o["sampler"].gamma, o["sampler"].alpha) == (0.5, 0.15, 0.2, 0.2)
    assert (o["segmenter"].keep_images, o["segmenter"].min_removal) == (8, 5)
    assert (c.rollout.name, o["rollout"].tensor_parallel_size) == ("vllm", 2)
    assert (c.trainer.name, o["trainer"].tensor_parallel_size, o["trainer"].lr) == ("megatron", 4, 3e-6)
    assert o["environment"].max_environments == 300 and c.rollout_loop.concurrency == 300
    assert o["environment"].desktop.name == "container-desktop"
    assert c.extra["ray"]["rollout_ratio"] == 0.25 and c.extra["ray"]["nodes"] * c.extra["ray"]["gpus_per_node"] == 64


def test_the_cpu_variant_keeps_the_method_and_swaps_only_the_scale_parts() -> None:
    paper, _ = load_config(PAPER, environ={})
    cpu, _ = load_config(CPU, environ={})
    for slot in ("sampler", "segmenter"):
        assert cpu.options[slot] == paper.options[slot], slot
    shared = ("max_seq_len", "temperature", "clip_low", "clip_high", "clip_c", "kl_coef", "entropy_coef",
              "incomplete_penalty")
    assert {k: getattr(cpu.config.algorithm, k) for k in shared} == {k: getattr(paper.config.algorithm, k) for k in shared}
    assert (cpu.config.rollout.name, cpu.config.trainer.name, cpu.options["model"].tiny is not None) == ("hf", "torch", True)
    assert cpu.options["environment"].desktop.name == "local-desktop"
    assert "ray" not in cpu.config.extra


def test_a_mistyped_desktop_option_is_reported_by_its_yaml_path() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(PAPER, ["environment.options.desktop.options.imag=x"], environ={})
    assert any(p.startswith("environment.options.desktop:") and "imag" in p for p in info.value.problems)
