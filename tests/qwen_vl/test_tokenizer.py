"""The tiny Qwen-style BPE tokenizer and loading real tokenizer directories."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.qwen_vl.tokenizer import (
    QWEN_ADDED_TOKENS,
    QWEN_SPECIAL_TOKENS,
    TokenizerLoadError,
    build_tiny_tokenizer,
    load_tokenizer,
)

_VOCAB_DIGEST = (
    "import hashlib, json; from plugins.qwen_vl.tokenizer import build_tiny_tokenizer; "
    "print(hashlib.sha1(json.dumps(sorted(build_tiny_tokenizer().get_vocab().items())).encode()).hexdigest())"
)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


def test_vocabulary_is_the_same_in_every_process(tokenizer):
    here = hashlib.sha1(json.dumps(sorted(tokenizer.get_vocab().items())).encode()).hexdigest()
    other = subprocess.run([sys.executable, "-c", _VOCAB_DIGEST], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == here


def test_special_tokens_follow_the_bpe_vocabulary_in_qwen_order(tokenizer):
    assert len(tokenizer) == 800
    ids = tokenizer.convert_tokens_to_ids(list(QWEN_SPECIAL_TOKENS) + list(QWEN_ADDED_TOKENS))
    base = 800 - len(QWEN_SPECIAL_TOKENS) - len(QWEN_ADDED_TOKENS)
    assert ids == list(range(base, 800))
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    # special tokens are atomic, never split by BPE
    text = "<|vision_start|><|image_pad|><|vision_end|><think>x</think>"
    assert tokenizer.tokenize(text)[:3] == ["<|vision_start|>", "<|image_pad|>", "<|vision_end|>"]


def test_agent_text_compresses(tokenizer):
    text = 'left_click(x=512, y=384)\ntype(text="=SUM(B2:B11)")'
    assert len(tokenizer.encode(text)) < len(text.encode()) * 0.8


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_text_round_trips(tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == unicodedata.normalize("NFC", text)


def test_chat_template_is_qwen_style(tokenizer):
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "image"}]},
        {"role": "assistant", "content": "ok"},
    ]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nsys<|im_end|>\n"
        "<|im_start|>user\nhi <|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
        "<|im_start|>assistant\nok<|im_end|>\n<|im_start|>assistant\n"
    )


def test_too_small_vocab_is_rejected():
    with pytest.raises(ValueError, match="too small"):
        build_tiny_tokenizer(100)


def test_saved_directory_loads_identically(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)
    text = "<|im_start|>user\nOpen report.odt and type 2024<|im_end|>\n"
    assert loaded.encode(text, add_special_tokens=False) == tokenizer.encode(text, add_special_tokens=False)
    assert loaded.chat_template == tokenizer.chat_template


def test_chat_template_found_next_to_processor_config(tokenizer, tmp_path):
    """Qwen2-VL checkpoints ship the template as chat_template.json."""
    tokenizer.save_pretrained(tmp_path)
    config_path = tmp_path / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.pop("chat_template", None)
    config_path.write_text(json.dumps(config))
    (tmp_path / "chat_template.jinja").unlink(missing_ok=True)
    with pytest.raises(TokenizerLoadError, match="no chat template"):
        load_tokenizer(tmp_path)
    (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": tokenizer.chat_template}))
    assert load_tokenizer(tmp_path).chat_template == tokenizer.chat_template


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(TokenizerLoadError, match="does not exist"):
        load_tokenizer(tmp_path / "nope")
