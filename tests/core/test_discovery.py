"""Third-party plugins arrive through entry points. These tests fake an installed
distribution with a real ``*.dist-info`` directory on ``sys.path`` (importlib.metadata
discovers it exactly as it would a pip-installed package); nothing is installed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from core.config import load_config
from core.errors import PluginError
from core.pluginmanager import load_plugins

PLUGIN_SOURCE = textwrap.dedent(
    '''
    from pydantic import BaseModel, ConfigDict
    from core import hookimpl
    from core.interfaces import Sampler


    class RoundRobinOptions(BaseModel):
        model_config = ConfigDict(extra="forbid")
        stride: int = 1


    class RoundRobin(Sampler):
        def __init__(self, options, **context):
            self.stride = options.stride
            self.ids = []

        def setup(self, tasks, *, seed):
            self.ids = [t.id for t in tasks]

        def select(self, iteration, batch_size):
            start = iteration * self.stride
            return [self.ids[(start + i) % len(self.ids)] for i in range(batch_size)]

        def observe(self, iteration, outcomes):
            pass

        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass


    class NotASampler:
        def __init__(self, options, **context):
            pass


    @hookimpl
    def scalecua_register_samplers(registry):
        registry.register("round-robin", RoundRobin, options=RoundRobinOptions)
        registry.register("not-a-sampler", NotASampler)
    '''
)


@pytest.fixture
def fake_distribution(tmp_path, monkeypatch):
    """A distribution 'scalecua-foo' 1.2.3 declaring the entry point foo = scalecua_foo."""
    (tmp_path / "scalecua_foo.py").write_text(PLUGIN_SOURCE)
    dist_info = tmp_path / "scalecua_foo-1.2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: scalecua-foo\nVersion: 1.2.3\n")
    (dist_info / "entry_points.txt").write_text("[scalecua]\nfoo = scalecua_foo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "scalecua_foo", raising=False)
    return tmp_path


def test_third_party_sampler_is_selectable_from_yaml(fake_distribution, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("sampler:\n  name: round-robin\n  options: {stride: 4}\n")
    resolved, plugins = load_config(config, environ={})
    component = plugins.registry("sampler").get("round-robin")
    assert (component.provider, component.version) == ("scalecua-foo", "1.2.3")
    sampler = resolved.create("sampler", plugins)
    assert type(sampler).__name__ == "RoundRobin" and sampler.stride == 4


def test_blocked_plugin_is_not_loaded(fake_distribution):
    plugins = load_plugins(environ={"SCALECUA_DISABLE_PLUGINS": "foo"})
    assert "scalecua_foo" not in sys.modules
    assert plugins.skipped["foo"] == "blocked"
    assert "round-robin" not in plugins.registry("sampler")


def test_blocked_by_yaml_and_by_distribution_name(fake_distribution, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("plugins:\n  disable: [scalecua-foo]\n")
    _, plugins = load_config(config, environ={})
    assert "scalecua_foo" not in sys.modules
    assert "round-robin" not in plugins.registry("sampler")


def test_allowlist_loads_only_listed_plugins(fake_distribution):
    plugins = load_plugins(environ={"SCALECUA_PLUGINS": "foo"})
    assert set(plugins.infos) == {"foo"}


def test_required_plugin_missing_is_an_error():
    with pytest.raises(PluginError, match="'scalecua-bar' \\(not installed\\)"):
        load_plugins(require=["scalecua-bar"], environ={})


def test_broken_plugin_names_itself(fake_distribution):
    (fake_distribution / "scalecua_foo.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(PluginError) as info:
        load_plugins(environ={})
    message = str(info.value)
    assert "'foo'" in message and "scalecua-foo" in message and "boom" in message
    assert "SCALECUA_DISABLE_PLUGINS=foo" in message


def test_plugins_cli_lists_builtins_with_distribution_and_version():
    out = subprocess.run(
        [sys.executable, "-m", "core.plugins", "--json"], capture_output=True, text=True, check=True
    ).stdout
    payload = json.loads(out)
    by_name = {p["name"]: p for p in payload["plugins"]}
    assert by_name["samplers"]["distribution"] == "scalecua"
    assert by_name["samplers"]["version"]
    assert set(payload["components"]) >= {"environment", "sampler", "segmenter", "trainer", "rollout_engine"}
    for items in payload["components"].values():
        for component in items:
            assert component["provider"] == "scalecua" and component["version"]
