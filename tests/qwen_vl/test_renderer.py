"""QwenVLRenderer equals the chat template + placeholder expansion, for random conversations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.interfaces import Message
from plugins.qwen_vl.renderer import RenderError, to_hf_message
from tests.qwen_vl.helpers import screenshot

SHOTS = [screenshot(w, h, seed=i) for i, (w, h) in enumerate([(64, 64), (100, 60), (40, 200), (256, 160)])]

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
parts = st.lists(st.one_of(texts, st.sampled_from(SHOTS)), min_size=1, max_size=4)
messages = st.lists(
    st.builds(Message, role=st.sampled_from(["system", "user", "assistant"]), content=parts), min_size=1, max_size=6
)


def reference_ids(renderer, msgs, add_generation_prompt):
    """Independent path: expand the pads in the template TEXT, then tokenize the whole string."""
    tokenizer = renderer.tokenizer
    text = tokenizer.apply_chat_template(
        [to_hf_message(m) for m in msgs], tokenize=False, add_generation_prompt=add_generation_prompt
    )
    images = [p for m in msgs for p in m.content if not isinstance(p, str)]
    pieces = text.split("<|image_pad|>")
    assert len(pieces) == len(images) + 1
    expanded = pieces[0]
    for image, piece in zip(images, pieces[1:]):
        expanded += "<|image_pad|>" * renderer.image_tokens(image) + piece
    return tokenizer.encode(expanded, add_special_tokens=False)


@settings(max_examples=60, deadline=None)
@given(msgs=messages, generation=st.booleans())
def test_render_matches_the_chat_template(qwen3, msgs, generation):
    renderer = qwen3.renderer()
    rendered = renderer.render(msgs, add_generation_prompt=generation)
    assert rendered.ids == reference_ids(renderer, msgs, generation)
    assert rendered.images == [p for m in msgs for p in m.content if not isinstance(p, str)]
    # collapsing gives exactly the template's own tokenization (one placeholder per image)
    hf = renderer.tokenizer.apply_chat_template(
        [to_hf_message(m) for m in msgs], tokenize=True, add_generation_prompt=generation, return_dict=False
    )
    assert renderer.collapse_image_pads(rendered.ids) == list(hf)
    runs = [length for _, length in renderer.image_pad_runs(rendered.ids)]
    assert runs == [renderer.image_tokens(s) for s in rendered.images]


def test_ids_and_stop_tokens(qwen3):
    renderer = qwen3.renderer()
    vocab = renderer.tokenizer.get_vocab()
    assert renderer.image_pad_id == vocab["<|image_pad|>"]
    assert renderer.stop_ids == (vocab["<|im_end|>"], vocab["<|endoftext|>"])
    assert vocab["<|im_end|>"] not in renderer.suppress_ids
    assert {vocab["<|vision_start|>"], vocab["<|image_pad|>"], vocab["<|im_start|>"]} <= set(renderer.suppress_ids)
    prompt = renderer.render([Message("user", ["hi"])], add_generation_prompt=True)
    assert renderer.decode(prompt.ids) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert renderer.decode(renderer.encode_text("done()")) == "done()"
    assert renderer.decode(prompt.ids, skip_special_tokens=True) == "user\nhi\nassistant\n"


def test_bad_messages_are_named(qwen3):
    renderer = qwen3.renderer()
    with pytest.raises(RenderError, match="role 'tool'"):
        renderer.render([Message("tool", ["x"])], add_generation_prompt=False)
    with pytest.raises(RenderError, match="str or Screenshot"):
        renderer.render([Message("user", [42])], add_generation_prompt=False)  # type: ignore[list-item]
    with pytest.raises(RenderError, match="more image placeholders than the 1 images"):
        renderer.expand_image_pads([renderer.image_pad_id, 5, renderer.image_pad_id], SHOTS[:1])
    with pytest.raises(RenderError, match="1 image placeholders for 2 images"):
        renderer.expand_image_pads([renderer.image_pad_id, 5], SHOTS[:2])


@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.sampled_from([1, 2, 3, "pad"]), max_size=60))
def test_fast_collapse_and_runs_match_the_plain_definitions(qwen3, ids):
    from core.interfaces import ChatRenderer

    renderer = qwen3.renderer()
    ids = [renderer.image_pad_id if t == "pad" else t for t in ids]
    assert renderer.collapse_image_pads(ids) == ChatRenderer.collapse_image_pads(renderer, ids)
    runs, start = [], None
    for i, t in enumerate(ids + [0]):
        if t == renderer.image_pad_id and start is None:
            start = i
        elif t != renderer.image_pad_id and start is not None:
            runs.append((start, i - start))
            start = None
    assert renderer.image_pad_runs(ids) == runs


def test_fast_decode_equals_the_tokenizer(qwen3):
    renderer = qwen3.renderer()
    prompt = renderer.render([Message("user", ["déjà vu 数据 ", SHOTS[0]])], add_generation_prompt=True)
    for skip in (False, True):
        assert renderer.decode(prompt.ids, skip_special_tokens=skip) == renderer.tokenizer.decode(
            prompt.ids, skip_special_tokens=skip
        )
