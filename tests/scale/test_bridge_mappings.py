"""The names the ``megatron`` backend exports are Megatron-Bridge's own: the Hugging Face side of the Qwen-VL
bridges' mapping tables (read from the installed Bridge, else from the wheel of the release the ``megatron``
extra names: see bridge_source.py), expanded for the project's tiny Qwen3-VL and Qwen2.5-VL, go through
:func:`trainers.megatron.names.language_model_weights` onto the transformers 5 model: every language-model
parameter covered once, vision recognised and dropped, no bridge name rejected. Slow: the first run downloads the
wheel (~2 MB, cached)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from packaging.version import Version

from tests.scale.bridge_source import BridgeSource, export_names, pinned_version, requirement, shape_for
from trainers.megatron import names
from trainers.megatron.names import expected_parameters, language_model_weights, to_transformers_name

pytestmark = pytest.mark.slow

FAMILIES = ("qwen3_vl", "qwen2_5_vl")


@pytest.fixture(scope="module")
def bridge() -> BridgeSource:
    return BridgeSource.locate()


@pytest.fixture(scope="module")
def models() -> dict[str, tuple[Any, Any, dict[str, tuple[int, ...]]]]:
    """family -> (policy model, its transformers config, its parameters' shapes)."""
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

    out = {}
    for family in FAMILIES:
        model = QwenVLModel(QwenVLOptions(tiny={"family": family}, seed=0))
        out[family] = (model, model.hf_config(), expected_parameters(model))
    return out


def bridge_stream(bridge: BridgeSource, family: str, models: dict) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor of the model's shape) for every weight the Bridge's export yields, under the Bridge's names."""
    model, config, expected = models[family]
    exported, _ = export_names(bridge, family, config, expected)
    skip = model.vision_parameter_prefixes()
    return [(n, torch.empty(shape_for(n, expected, skip), device="meta")) for n in exported]


def check(bridge: BridgeSource, family: str, models: dict) -> dict[str, torch.Tensor]:
    model, _, expected = models[family]
    return dict(language_model_weights(bridge_stream(bridge, family, models), expected,
                                       model.vision_parameter_prefixes()))


def test_the_release_read_is_the_extras(bridge: BridgeSource) -> None:
    assert requirement().specifier.contains(bridge.version), (bridge.origin, bridge.version)
    if bridge.origin.endswith(".whl"):
        assert Version(bridge.version) == Version(pinned_version()) == Version("0.6.0"), bridge.origin


@pytest.mark.parametrize("family", FAMILIES)
def test_bridge_export_names_cover_the_language_model(bridge: BridgeSource, models: dict, family: str) -> None:
    model, config, expected = models[family]
    exported, skipped = export_names(bridge, family, config, expected)
    vision = model.vision_parameter_prefixes()
    got = check(bridge, family, models)  # raises on a rejected name, a wrong shape or a missing weight
    language = {n for n in expected if not n.startswith(vision)}
    assert set(got) == language and len(got) == len(language)
    # vision: recognised as vision, dropped, and each the name of a vision parameter of the model
    renamed = [to_transformers_name(n) for n in exported]
    vision_names = [n for n in renamed if n.startswith(vision)]
    assert vision_names and not set(vision_names) & set(got)
    assert set(vision_names) <= {n for n in expected if n.startswith(vision)}
    assert not set(renamed) - set(got) - set(vision_names) - {"lm_head.weight"}  # tied: the model shares it
    # the optional weights left out are those the provider turns off (Qwen3-VL: no q/k/v biases)
    assert [m.megatron for m in skipped] == (
        ["language_model.decoder.layers.*.self_attention.linear_qkv.bias"] if family == "qwen3_vl" else [])


def test_the_tables_read_are_the_qwen_vl_bridges(bridge: BridgeSource) -> None:
    for family, module, cls in (("qwen3_vl", "qwen3_vl_bridge", "Qwen3VLBridge"),
                                ("qwen2_5_vl", "qwen25_vl_bridge", "Qwen25VLBridge")):
        path, node = bridge.bridge(family)
        assert (path, node.name) == (f"megatron/bridge/models/qwen_vl/{module}.py", cls)
        kinds = {m.cls for m in bridge.mappings(family)}
        assert {"AutoMapping", "QKVMapping", "GatedMLPMapping", "ReplicatedMapping"} <= kinds, kinds
        gated = next(m for m in bridge.mappings(family) if m.cls == "GatedMLPMapping")
        assert [role for role, _ in gated.hf] == ["gate", "up"]  # type: ignore[union-attr]


@pytest.mark.parametrize("entry", names._PREFIXES, ids=[old for old, _ in names._PREFIXES])
def test_a_prefix_table_without_an_entry_fails(bridge: BridgeSource, models: dict, monkeypatch,
                                               entry: tuple[str, str]) -> None:
    """Every entry of names.py's table is needed by some Qwen-VL bridge: without it an exported name fails."""
    monkeypatch.setattr(names, "_PREFIXES", tuple(p for p in names._PREFIXES if p != entry))
    errors = []
    for family in FAMILIES:
        try:
            check(bridge, family, models)
        except (KeyError, ValueError) as error:
            errors.append(str(error))
    assert any(re.search(re.escape(f"'{entry[0]}"), e) for e in errors), errors
