"""The invariant checks catch broken segments (so the property tests can fail)."""

from __future__ import annotations

import copy
import random

import pytest

from segmenters.checks import (
    check_prompts_precede_responses,
    check_segment_shape,
    check_stream_matches_template,
    check_trained_once,
    expected_sliding_segments,
)
from segmenters.synthetic import random_episode, run_episode
from segmenters.windowed import SlidingWindowOptions, SlidingWindowSegmenter
from tests.segmenters.conftest import SHOTS


@pytest.fixture(scope="module")
def good(renderer):
    episode = random_episode(renderer, random.Random(11), turns=9, screenshots=SHOTS, screenshot_rate=1.0)
    segmenter = SlidingWindowSegmenter(SlidingWindowOptions(keep_images=2, min_removal=2))
    run = run_episode(segmenter, renderer, episode)
    assert len(run.segments) > 2
    return episode, run


def shape(renderer, segments, **kw):
    return check_segment_shape(segments, renderer, trajectory_id="traj-0", task_id="task-0", **kw)


def test_clean_run_passes(renderer, good):
    episode, run = good
    assert check_trained_once(run.segments, episode.responses) == []
    assert check_prompts_precede_responses(run.segments, run.prompts, episode.responses) == []
    assert shape(renderer, run.segments, max_images=4) == []


def test_a_response_trained_twice_is_caught(good):
    episode, run = good
    segments = copy.deepcopy(run.segments)
    first = segments[0]
    segments[1].loss_mask[: len(first.loss_mask)] = [
        m or x for m, x in zip(segments[1].loss_mask, first.loss_mask)
    ]
    assert check_trained_once(segments, episode.responses)


def test_a_changed_logprob_or_id_is_caught(good):
    episode, run = good
    segments = copy.deepcopy(run.segments)
    position = segments[2].loss_mask.index(1)
    segments[2].rollout_logprobs[position] += 0.01
    assert "logprobs" in check_trained_once(segments, episode.responses)[0]
    segments = copy.deepcopy(run.segments)
    segments[2].input_ids[position] += 1
    assert "ids" in check_trained_once(segments, episode.responses)[0]


def test_a_shifted_prompt_is_caught(good):
    episode, run = good
    prompts = copy.deepcopy(run.prompts)
    prompts[3][0][5] += 1
    assert check_prompts_precede_responses(run.segments, prompts, episode.responses)


def test_shape_problems_are_caught(renderer, good):
    _, run = good
    segments = copy.deepcopy(run.segments)
    assert shape(renderer, segments, max_images=3)  # more images than the window
    segments[0].images = segments[0].images[::-1] + [SHOTS[0]]
    segments[1].index = 5
    segments[2].rollout_logprobs[0] = -1.0  # a context token with a logprob
    problems = "\n".join(shape(renderer, segments))
    assert "segment 0: placeholder runs" in problems
    assert "segment 1: carries" in problems
    assert "segment 2: non-zero rollout logprob" in problems


def test_stream_drift_is_caught(renderer, good):
    _, run = good
    context = run.context
    assert check_stream_matches_template(context) == []
    original = context.stream
    try:
        context.stream = copy.deepcopy(original)
        context.stream.ids[3] = renderer.encode_text("zz")[0]
        assert check_stream_matches_template(context)
    finally:
        context.stream = original


def test_expected_segment_counts():
    assert expected_sliding_segments(turns=3, observations=3, keep=5, removal=5) == 1
    assert expected_sliding_segments(turns=10, observations=10, keep=5, removal=5) == 1 + 0
    assert expected_sliding_segments(turns=11, observations=10, keep=5, removal=5) == 2
    assert expected_sliding_segments(turns=50, observations=49, keep=5, removal=5) == 9
    assert expected_sliding_segments(turns=7, observations=7, keep=1, removal=1) == 6


def test_a_response_recorded_under_the_wrong_turn_or_place_is_caught(good):
    episode, run = good
    segments = copy.deepcopy(run.segments)
    turn, start, end = segments[1].responses[0]
    segments[1].responses[0] = (turn + 1, start, end)
    assert "record responses of turns" in check_trained_once(segments, episode.responses)[0]
    segments = copy.deepcopy(run.segments)
    segments[1].responses[0] = (turn, start + 1, end)
    assert "recorded at segment" in check_trained_once(segments, episode.responses)[0]
