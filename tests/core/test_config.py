from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import BaseModel, ConfigDict

from core import hookimpl
from core.config import load_config, load_raw, validate
from core.errors import ConfigError


class FrontierOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sigma: float = 0.25
    mu: float = 0.5


class Samplers:
    @hookimpl
    def scalecua_register_samplers(self, registry):
        registry.register("frontier-test", lambda options, **_: options, options=FrontierOptions)
        registry.register("uniform-test", lambda options, **_: options)


@pytest.fixture
def test_plugins(plugins):
    plugins.register(Samplers(), name="config-test-samplers")
    yield plugins
    plugins.unregister("config-test-samplers")


def test_all_problems_reported_at_once_by_path(test_plugins):
    raw = {
        "sampler": {"name": "frontier-test", "options": {"sigmaa": 0.1, "mu": "high"}},
        "segmenter": {"name": "sliding-windw"},
        "algorithm": {"batch_size": 0},
    }
    with pytest.raises(ConfigError) as info:
        validate(raw, test_plugins)
    problems = info.value.problems
    assert any(p.startswith("sampler.options.sigmaa: unknown option") and "Did you mean 'sigma'?" in p for p in problems)
    assert any(p.startswith("sampler.options.mu:") and "number" in p for p in problems)
    assert any(p.startswith("algorithm.batch_size:") for p in problems)
    assert len(problems) == 4


def test_a_retired_key_names_what_replaced_it(test_plugins):
    with pytest.raises(ConfigError) as info:
        validate({"run": {"name": "x", "tensorboard": True}}, test_plugins)
    assert info.value.problems == [
        "run.tensorboard: unknown key. It was replaced by trackers: [{name: tensorboard}] (a tracker plugin; "
        "several trackers may run at once)."
    ]


def test_overrides_and_interpolation(tmp_path, test_plugins):
    path = tmp_path / "c.yaml"
    path.write_text(
        "run: {name: exp, seed: 3}\n"
        "sampler: {name: frontier-test, options: {sigma: 0.25}}\n"
        "extra: {tag: '${run.name}-${run.seed}'}\n"
    )
    raw = load_raw(path, ["~sampler.options", "sampler.name=uniform-test", "run.seed=7"])
    resolved = validate(raw, test_plugins)
    assert resolved.components["sampler"].name == "uniform-test"
    assert resolved.config.extra["tag"] == "exp-7"


def test_override_without_equals_is_a_config_error(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("run: {}\n")
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_raw(path, ["sampler.name"])
    with pytest.raises(ConfigError, match="no key 'sampler.options' to delete"):
        load_raw(path, ["~sampler.options"])


def test_required_slot_missing_lists_available(test_plugins):
    with pytest.raises(ConfigError) as info:
        validate({}, test_plugins, required=["sampler"])
    assert "sampler: required by this command" in str(info.value)
    assert "frontier-test" in str(info.value)


def test_slot_shape_errors(test_plugins):
    with pytest.raises(ConfigError) as info:
        validate({"sampler": "frontier-test"}, test_plugins)
    assert info.value.problems[0].startswith("sampler:")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml", environ={})


def test_cli_reports_three_problems_with_exit_code_2(tmp_path):
    """A misspelled component, an unknown option and a wrong option type, in one message."""
    path = tmp_path / "bad.yaml"
    path.write_text(
        "sampler: {name: fronteir}\n"
        "segmenter: {name: sliding-window, options: {keep_imagse: 5}}\n"
        "algorithm: {n_rollouts: many}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "core.run", "--config", str(path), "--dry-run"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr
    assert "Traceback" not in err
    assert "sampler.name: unknown sampler 'fronteir'. Did you mean 'frontier'?" in err
    assert "segmenter.options.keep_imagse: unknown option. Did you mean 'keep_images'?" in err
    assert "algorithm.n_rollouts:" in err
