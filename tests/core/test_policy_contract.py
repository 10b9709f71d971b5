"""The model contract's support rule (:meth:`core.interfaces.PolicyModel.suppressed_ids`), one place for
every trainer and engine, on the real tiny Qwen-VL family and on a family that only says the basics."""

from __future__ import annotations

from typing import Any

import pytest

from core.errors import ScaleCUAError
from core.interfaces import PolicyModel


class _Renderer:
    image_pad_id = 5
    stop_ids = (2,)
    suppress_ids = (5, 6)
    tokenizer_size = 10


class _Family(PolicyModel):
    def __init__(self, rows: int, renderer: Any = None) -> None:
        self.rows = rows
        self._renderer = renderer or _Renderer()

    def renderer(self) -> Any:
        return self._renderer

    def load(self, *, dtype: str = "float32", device: str = "cpu") -> Any:
        raise AssertionError("not needed")

    def vocab_size(self) -> int:
        return self.rows


def test_support_excludes_special_ids_and_the_heads_padding_rows() -> None:
    assert _Family(12).suppressed_ids() == [5, 6, 10, 11]  # rows 10, 11 decode to nothing
    assert _Family(8).suppressed_ids() == [5, 6]  # ids past the head are not the policy's anyway


def test_a_stop_id_that_is_also_suppressed_is_refused() -> None:
    renderer = _Renderer()
    renderer.suppress_ids = (2, 5)
    with pytest.raises(ValueError, match=r"stop ids \[2\] are also suppressed"):
        _Family(12, renderer).suppressed_ids()


def test_a_family_that_does_not_say_its_vocabulary_gets_a_clear_error() -> None:
    class Bare(_Family):
        vocab_size = PolicyModel.vocab_size  # type: ignore[assignment]

    with pytest.raises(ScaleCUAError, match="does not say its vocabulary size"):
        Bare(12).suppressed_ids()
    with pytest.raises(ScaleCUAError, match="has no Hugging Face config"):
        Bare(12).hf_config()


def test_the_tiny_qwen_family_agrees_with_its_own_module() -> None:
    from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions

    policy_model = QwenVLModel(QwenVLOptions(tiny={"family": "qwen3_vl"}, seed=0))
    module = policy_model.load()
    assert policy_model.vocab_size() == module.get_output_embeddings().weight.shape[0]
    renderer = policy_model.renderer()
    suppressed = policy_model.suppressed_ids()
    assert renderer.image_pad_id in suppressed and not set(renderer.stop_ids) & set(suppressed)
    assert all(i < renderer.tokenizer_size or i in suppressed for i in range(policy_model.vocab_size()))
