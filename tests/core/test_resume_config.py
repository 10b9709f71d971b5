"""A resumed run keeps the configuration it was started with: another config or override is refused, naming
each key that differs, and nothing is written; only the listed keys (run.iterations, ...) may change."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.runtime import rundir
from core.config import load_config
from core.errors import ConfigError

QUICKSTART = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"


def _resolved(tmp_path: Path, *overrides: str):
    return load_config(QUICKSTART, [f"run.output_dir={tmp_path}", *overrides], environ={})


def test_a_resume_with_a_changed_configuration_is_refused_naming_what_differs(tmp_path) -> None:
    resolved, plugins = _resolved(tmp_path)
    run_dir = rundir.prepare(resolved, plugins)
    saved = (run_dir / "config.yaml").read_text()
    changed, _ = _resolved(tmp_path, "trainer.options.lr=0.5", "sampler.options.mu=0.4")
    with pytest.raises(ConfigError) as err:
        rundir.prepare(changed, plugins, resume=run_dir)
    message = str(err.value)
    assert "trainer.options.lr: the run was started with 0.0001, this command gives 0.5" in message
    assert "sampler.options.mu: the run was started with 0.5, this command gives 0.4" in message
    assert "run.iterations" in message  # what may change
    assert (run_dir / "config.yaml").read_text() == saved  # nothing written


def test_a_resume_may_extend_the_run(tmp_path) -> None:
    resolved, plugins = _resolved(tmp_path)
    run_dir = rundir.prepare(resolved, plugins)
    extended, _ = _resolved(tmp_path, "run.iterations=60", "run.log_level=debug")
    assert rundir.prepare(extended, plugins, resume=run_dir) == run_dir
    assert "iterations: 60" in (run_dir / "config.yaml").read_text()
    same, _ = _resolved(tmp_path)
    assert rundir.prepare(same, plugins, resume=True) == run_dir  # the latest run of this name


def test_a_resume_by_another_command_is_refused_naming_the_one_that_made_the_run(tmp_path) -> None:
    from core.commands.pipeline import recipe_dir

    resolved, plugins = _resolved(tmp_path)
    rl = rundir.prepare(resolved, plugins, command="core.run")
    saved = (rl / "config.yaml").read_text()
    with pytest.raises(ConfigError, match=r"is a run of python -m core\.run, not of python -m core\.sft; resume it "
                                          r"with python -m core\.run --config .*config\.yaml --resume"):
        rundir.prepare(resolved, plugins, resume=rl, command="core.sft")
    with pytest.raises(ConfigError, match=r"is a run of python -m core\.run, not of python -m core\.pipeline"):
        recipe_dir(resolved, plugins, rl)
    assert (rl / "config.yaml").read_text() == saved
    assert rundir.prepare(resolved, plugins, resume=rl, command="plugins.ray.run") == rl  # the same loop

    root = recipe_dir(resolved, plugins, None)
    with pytest.raises(ConfigError, match=r"is a run of python -m core\.pipeline, not of python -m core\.run"):
        rundir.prepare(resolved, plugins, resume=root, command="core.run")
    assert recipe_dir(resolved, plugins, root) == root
