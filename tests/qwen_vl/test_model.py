"""The qwen-vl model family: options, tiny builds of each architecture, local directories, registration."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from core.interfaces import Message
from plugins.qwen_vl.forward import build_model_inputs
from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions, TinyModelSettings
from tests.qwen_vl.helpers import FAMILIES, SMALL_PIXELS, screenshot, tiny_model


def test_options_need_exactly_one_source():
    with pytest.raises(ValidationError, match="exactly one of 'path'"):
        QwenVLOptions()
    with pytest.raises(ValidationError, match="exactly one of 'path'"):
        QwenVLOptions(path="/x", tiny=TinyModelSettings())
    with pytest.raises(ValidationError, match="extra"):
        QwenVLOptions.model_validate({"tiny": {}, "hidden": 3})


def test_tiny_settings_are_checked():
    with pytest.raises(ValidationError, match="summing to head_dim/2 = 16"):
        TinyModelSettings(mrope_section=[8, 8, 8])
    with pytest.raises(ValidationError, match="set head_dim=16"):
        TinyModelSettings(family="qwen2_vl", hidden_size=64)
    with pytest.raises(ValidationError, match="multiple of num_kv_heads"):
        TinyModelSettings(num_heads=3, num_kv_heads=2)
    assert sum(TinyModelSettings().resolved_mrope_section()) == 16
    assert TinyModelSettings(head_dim=128, family="qwen3_vl").resolved_mrope_section() == [24, 20, 20]


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        QwenVLModel(QwenVLOptions(path=str(tmp_path)))


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_model_of_each_family(family):
    model = tiny_model(family)
    hf = model.load()
    assert model.family == family
    assert hf.config.model_type == family
    n_params = sum(p.numel() for p in hf.parameters())
    assert 300_000 < n_params < 1_500_000
    names = [name for name, _ in hf.named_parameters()]
    vision = [n for n in names if n.startswith(model.vision_parameter_prefixes())]
    assert vision and all("visual" in n for n in vision)
    assert all("visual" not in n for n in names if n not in vision)
    renderer = model.renderer()
    prompt = renderer.render([Message("user", ["look", screenshot(64, 96)])], add_generation_prompt=True)
    with torch.no_grad():
        logits = hf(**build_model_inputs(renderer, prompt.ids, prompt.images)).logits
    assert logits.shape == (1, len(prompt.ids), len(renderer.tokenizer))
    assert torch.isfinite(logits).all()


def test_same_seed_same_weights_and_global_rng_untouched():
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = tiny_model(seed=7).load()
    assert torch.equal(torch.rand(1), expected_next)
    b = tiny_model(seed=7).load()
    c = tiny_model(seed=8).load()
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_saved_directory_loads_the_same_model(tmp_path):
    tiny = tiny_model("qwen2_5_vl", seed=3)
    out = tiny.save_pretrained_dir(tmp_path / "model")
    assert {"config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json"} <= {
        p.name for p in out.iterdir()
    }
    loaded = QwenVLModel(QwenVLOptions(path=str(out)))
    assert loaded.family == "qwen2_5_vl"
    assert loaded.image_processor.settings == tiny.image_processor.settings
    msgs = [Message("system", ["act"]), Message("user", ["click ok", screenshot(80, 80)])]
    a = tiny.renderer().render(msgs, add_generation_prompt=True)
    b = loaded.renderer().render(msgs, add_generation_prompt=True)
    assert a.ids == b.ids
    with torch.no_grad():
        la = tiny.load()(**build_model_inputs(tiny.renderer(), a.ids, a.images)).logits
        lb = loaded.load()(**build_model_inputs(loaded.renderer(), b.ids, b.images)).logits
    assert torch.equal(la, lb)


def test_model_directory_is_the_configured_one_or_a_fresh_copy(tmp_path):
    """PolicyModel.model_directory (what vLLM and Megatron-Bridge load from): a tiny model writes itself out."""
    from core.errors import ScaleCUAError
    from core.interfaces import PolicyModel

    tiny = tiny_model(seed=3)
    written = tiny.model_directory()
    assert (written / "config.json").is_file() and (written / "model.safetensors").is_file()
    assert QwenVLModel(QwenVLOptions(path=str(written))).model_directory() == written

    class Opaque(PolicyModel):  # a family with only the abstract methods (never called here)
        def renderer(self):
            return None

        def load(self, *, dtype="float32", device="cpu"):
            return None

    with pytest.raises(ScaleCUAError, match="implement PolicyModel.model_directory"):
        Opaque().model_directory()
    with pytest.raises(ScaleCUAError, match="PolicyModel.model_inputs"):
        Opaque().model_inputs([[1, 2]], [[]])
    from core.config import AlgorithmSection
    from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

    with pytest.raises(TypeError, match="PolicyModel.model_inputs and PolicyModel.token_logprobs; Opaque does not"):
        TorchTrainer(TorchTrainerOptions(device="cpu"), model=Opaque(), algorithm=AlgorithmSection())


def test_directory_without_weights_builds_seeded_random_weights(tmp_path):
    tiny = tiny_model(seed=5)
    out = tiny.save_pretrained_dir(tmp_path)
    (out / "model.safetensors").unlink()
    loaded = QwenVLModel(QwenVLOptions(path=str(out), seed=5, **SMALL_PIXELS)).load()
    reference = tiny.load().state_dict()
    assert all(torch.equal(v, reference[k]) for k, v in loaded.state_dict().items())


def test_bfloat16_load_and_bad_dtype():
    model = tiny_model()
    assert next(model.load(dtype="bfloat16").parameters()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="dtype 'int8'"):
        model.load(dtype="int8")


def test_registered_as_qwen_vl(plugins):
    registry = plugins.registry("model")
    assert "qwen-vl" in registry
    model = registry.create("qwen-vl", {"tiny": {"family": "qwen2_vl"}, "min_pixels": 1024}, run_dir=None)
    assert isinstance(model, QwenVLModel)
    assert model.describe()["family"] == "qwen2_vl"


def test_make_tiny_writes_a_loadable_directory(tmp_path):
    from plugins.qwen_vl.make_tiny import main

    assert main([str(tmp_path / "m"), "--family", "qwen2_vl", "--max-pixels", "20000", "--min-pixels", "1024"]) == 0
    loaded = QwenVLModel(QwenVLOptions(path=str(tmp_path / "m")))
    assert loaded.family == "qwen2_vl"
    assert loaded.image_processor.settings.max_pixels == 20000
    assert sum(p.numel() for p in loaded.load().parameters()) < 1_500_000
