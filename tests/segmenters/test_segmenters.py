"""Segmenter behaviour in concrete episodes: the paper's setting, prompt format, protocol errors, templates."""

from __future__ import annotations

import copy
import random

import pytest
from pydantic import ValidationError

from core.types import Observation
from plugins.qwen_vl.renderer import QwenVLRenderer
from segmenters.checks import (
    SampledResponse,
    check_prompts_precede_responses,
    check_segment_shape,
    check_trained_once,
    expected_sliding_segments,
)
from segmenters.prompt import DEFAULT_MARKER
from segmenters.step_wise import StepWiseSegmenter
from segmenters.synthetic import random_episode, run_episode, sample_response
from segmenters.windowed import SlidingWindowOptions, SlidingWindowSegmenter, TrajectorySegmenter
from tests.segmenters.conftest import SHOTS


def start(segmenter, renderer, instruction="Open report.odt", screenshot=SHOTS[0]):
    return segmenter.start(
        renderer=renderer,
        trajectory_id="traj-7",
        task_id="task-3",
        system_prompt="You are an agent. Actions: left_click(x, y), done().",
        instruction=instruction,
        observation=Observation(screenshot=screenshot),
    )


def respond(context, renderer, text, *, stop=True):
    ids = renderer.encode_text(text) + ([renderer.stop_ids[0]] if stop else [])
    logprobs = [-0.5] * len(ids)
    context.add_response(ids, logprobs, renderer.decode(ids))
    return SampledResponse(ids, logprobs, text)


def test_paper_setting_fifty_turns(renderer):
    """K = Delta = 5, 50 turns, a screenshot after every action: 9 segments of at most 10 screenshots."""
    episode = random_episode(renderer, random.Random(3), turns=50, screenshots=SHOTS, screenshot_rate=1.0)
    run = run_episode(SlidingWindowSegmenter(), renderer, episode, trajectory_id="t", task_id="k")
    assert len(run.segments) == expected_sliding_segments(50, 50, 5, 5) == 9
    # every segment ends when the 11th screenshot arrives; the last pruning comes after the last response
    assert [len(s.images) for s in run.segments] == [10] * 9
    assert check_trained_once(run.segments, episode.responses) == []
    assert check_prompts_precede_responses(run.segments, run.prompts, episode.responses) == []
    assert check_segment_shape(run.segments, renderer, trajectory_id="t", task_id="k", max_images=10) == []
    # the first segment trains turns 1-9, every later one Delta = 5 turns
    assert [sum(1 for _ in _runs(s)) for s in run.segments] == [10] + [5] * 8


def _runs(segment):
    from segmenters.checks import trained_runs

    return trained_runs(segment)


def test_prompt_format_and_markers(renderer):
    context = start(SlidingWindowSegmenter(SlidingWindowOptions(keep_images=1, min_removal=1)), renderer)
    ids, images = context.prompt()
    assert images == [SHOTS[0]]
    assert renderer.decode(renderer.collapse_image_pads(ids)) == (
        "<|im_start|>system\nYou are an agent. Actions: left_click(x, y), done().<|im_end|>\n"
        "<|im_start|>user\nTask: Open report.odt\n<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    respond(context, renderer, "left_click(x=1, y=2)")
    context.add_observation(Observation(screenshot=SHOTS[1], text="cursor at (1, 2)"), feedback="Action executed.")
    respond(context, renderer, "done()")
    context.add_observation(Observation(screenshot=SHOTS[2]))  # 3 > K + Delta: prune one
    ids, images = context.prompt()
    assert images == [SHOTS[1], SHOTS[2]]
    assert renderer.decode(renderer.collapse_image_pads(ids)).endswith(
        f"<|im_start|>user\nTask: Open report.odt\n{DEFAULT_MARKER}<|im_end|>\n"
        "<|im_start|>assistant\nleft_click(x=1, y=2)<|im_end|>\n"
        "<|im_start|>user\nAction executed.\ncursor at (1, 2)\n<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
        "<|im_start|>assistant\ndone()<|im_end|>\n"
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n<|im_start|>assistant\n"
    )
    # after a pruning the stream is context only: earlier responses are never trained twice
    assert context.stream.loss_mask == [0] * len(ids)
    segments = context.finish()
    assert len(segments) == 1
    trained = sum(len(renderer.encode_text(t)) + 1 for t in ("left_click(x=1, y=2)", "done()"))
    assert segments[0].num_trainable == trained


def test_observation_without_screenshot_or_feedback(renderer):
    context = start(TrajectorySegmenter(), renderer)
    respond(context, renderer, "wait()")
    context.add_observation(Observation())
    ids, images = context.prompt()
    assert len(images) == 1
    assert renderer.decode(ids).endswith("<|im_start|>user\nAction executed.<|im_end|>\n<|im_start|>assistant\n")


def test_truncated_response_is_closed_like_the_template(renderer):
    """A response cut at max_new_tokens has no <|im_end|>: the stream closes the turn with mask 0."""
    context = start(TrajectorySegmenter(), renderer)
    respond(context, renderer, "left_click(x=5", stop=False)
    context.add_observation(Observation(screenshot=SHOTS[1]))
    ids, _ = context.prompt()
    assert renderer.decode(ids).count("left_click(x=5<|im_end|>\n<|im_start|>user\n") == 1
    segment = context.finish()[0]
    assert segment.num_trainable == len(renderer.encode_text("left_click(x=5"))


def test_stop_text_in_response_text_is_not_doubled(renderer):
    context = start(TrajectorySegmenter(), renderer)
    ids = renderer.encode_text("done()") + [renderer.stop_ids[0]]
    context.add_response(ids, [0.0] * len(ids), "done()<|im_end|>")
    assert context.history[-1].content == ["done()"]


def test_finish_trims_context_after_the_last_response(renderer):
    context = start(TrajectorySegmenter(), renderer)
    respond(context, renderer, "left_click(x=1, y=1)")
    context.add_observation(Observation(screenshot=SHOTS[4]))
    full = context.num_tokens
    segment = context.finish()[0]
    assert segment.input_ids[-1] == renderer.stop_ids[0]
    assert segment.images == [SHOTS[0]] and segment.num_tokens < full
    assert context.finish() == [segment]  # idempotent


def test_step_wise_items_and_num_tokens(renderer):
    context = start(StepWiseSegmenter(), renderer)
    first_prompt, _ = context.prompt()
    assert context.num_tokens == len(first_prompt)
    respond(context, renderer, "left_click(x=1, y=1)")
    context.add_observation(Observation(screenshot=SHOTS[1]), feedback="ok")
    ids, images = context.prompt()
    assert images == [SHOTS[1]]
    assert f"Task: Open report.odt\n{DEFAULT_MARKER}" in renderer.decode(ids)
    respond(context, renderer, "done()")
    items = context.finish()
    assert [s.index for s in items] == [0, 1]
    assert items[0].input_ids[: len(first_prompt)] == first_prompt
    assert items[1].input_ids[: len(ids)] == ids and items[1].images == [SHOTS[1]]


@pytest.mark.parametrize("make", [SlidingWindowSegmenter, TrajectorySegmenter, StepWiseSegmenter])
def test_turn_protocol_errors(renderer, make):
    context = start(make(), renderer)
    with pytest.raises(RuntimeError, match="waiting for the response"):
        context.add_observation(Observation(screenshot=SHOTS[1]))
    with pytest.raises(ValueError, match="2 response ids but 1 logprobs"):
        context.add_response([5, 6], [0.0], "x")
    respond(context, renderer, "done()")
    with pytest.raises(RuntimeError, match="waiting for the observation"):
        context.prompt()
    context.finish()
    with pytest.raises(RuntimeError, match="after finish"):
        context.add_observation(Observation())


def test_empty_instruction_is_rejected(renderer):
    with pytest.raises(ValueError, match="instruction is empty"):
        start(TrajectorySegmenter(), renderer, instruction="  ")


def test_options_and_registration(plugins):
    registry = plugins.registry("segmenter")
    assert {"sliding-window", "step-wise", "trajectory"} <= set(registry.names())
    sliding = registry.create("sliding-window", {"keep_images": 8})
    assert isinstance(sliding, SlidingWindowSegmenter) and sliding.window == (8, 5)
    assert registry.create("sliding-window", {}).window == (5, 5)
    assert isinstance(registry.create("step-wise", {}), StepWiseSegmenter)
    assert isinstance(registry.create("trajectory", None), TrajectorySegmenter)
    with pytest.raises(ValidationError):
        registry.create("sliding-window", {"keep_images": 0})
    with pytest.raises(ValidationError, match="extra"):
        registry.create("sliding-window", {"window": 3})


# A thinking-style template: only the reasoning of assistant turns after the last user turn is shown,
# so appending a user turn rewrites the previous assistant turn (no token diff exists).
REWRITING_TEMPLATE = (
    "{%- set last_user = namespace(i=-1) -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'user' -%}{%- set last_user.i = loop.index0 -%}{%- endif -%}"
    "{%- endfor -%}"
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' -}}"
    "{%- if m['content'] is string -%}{%- set text = m['content'] -%}"
    "{%- if m['role'] == 'assistant' and loop.index0 < last_user.i and '</think>' in text -%}"
    "{%- set text = text.split('</think>')[-1] -%}{%- endif -%}{{- text -}}"
    "{%- else -%}{%- for item in m['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- else -%}{{- item['text'] -}}{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def test_template_that_rewrites_history_keeps_what_the_policy_saw(renderer):
    tokenizer = copy.deepcopy(renderer.tokenizer)
    tokenizer.chat_template = REWRITING_TEMPLATE
    thinking = QwenVLRenderer(tokenizer, renderer.image_processor)
    segmenter = SlidingWindowSegmenter(SlidingWindowOptions(keep_images=2, min_removal=2))
    rng = random.Random(5)
    episode = random_episode(thinking, rng, turns=12, screenshots=SHOTS, screenshot_rate=1.0)
    for turn in episode.turns:
        response = sample_response(thinking, rng, 5, canonical=True, stop=thinking.stop_ids[0])
        text = "<think>\nthe button is left\n</think>\n" + response.text
        ids = thinking.encode_text(text.removesuffix("<|im_end|>")) + [thinking.stop_ids[0]]
        turn.response = SampledResponse(ids, [-1.0] * len(ids), thinking.decode(ids))
    run = run_episode(segmenter, thinking, episode)
    assert segmenter._diff(thinking).rewrites > 0
    assert check_trained_once(run.segments, episode.responses) == []
    assert check_prompts_precede_responses(run.segments, run.prompts, episode.responses) == []
    assert check_segment_shape(run.segments, thinking, trajectory_id="traj-0", task_id="task-0", max_images=4) == []
