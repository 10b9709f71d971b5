"""Invariants of the three segmenters over random trajectories (hypothesis).

Episodes have 1..60 turns, responses of random length (sometimes not the
tokenizer's own tokenization, sometimes cut without a stop token, sometimes
ending in <|endoftext|>), observations with or without a screenshot and with
random feedback text, and random K and Delta.
"""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from segmenters.checks import (
    check_prompts_precede_responses,
    check_segment_shape,
    check_stream_matches_template,
    check_trained_once,
    expected_sliding_segments,
)
from segmenters.step_wise import StepWiseSegmenter
from segmenters.synthetic import random_episode, run_episode
from segmenters.windowed import SlidingWindowOptions, SlidingWindowSegmenter, TrajectorySegmenter
from tests.segmenters.conftest import SHOTS

episodes = st.fixed_dictionaries(
    {
        "turns": st.integers(1, 60),
        "seed": st.integers(0, 2**32 - 1),
        "screenshot_rate": st.sampled_from([1.0, 1.0, 0.7]),
        "final_observation": st.booleans(),
        "max_response_words": st.sampled_from([1, 8, 40]),
    }
)
windows = st.tuples(st.integers(1, 15), st.integers(1, 15))


def make_episode(renderer, spec):
    rng = random.Random(spec["seed"])
    return random_episode(
        renderer,
        rng,
        turns=spec["turns"],
        screenshots=SHOTS,
        screenshot_rate=spec["screenshot_rate"],
        max_response_words=spec["max_response_words"],
        final_observation=spec["final_observation"],
    )


@settings(max_examples=40, deadline=None)
@given(spec=episodes, window=windows)
def test_sliding_window_invariants(renderer, spec, window):
    keep, removal = window
    episode = make_episode(renderer, spec)
    segmenter = SlidingWindowSegmenter(SlidingWindowOptions(keep_images=keep, min_removal=removal))
    run = run_episode(segmenter, renderer, episode, after_observation=check_stream_matches_template)
    assert run.problems == []
    assert check_trained_once(run.segments, episode.responses) == []
    assert check_prompts_precede_responses(run.segments, run.prompts, episode.responses) == []
    assert (
        check_segment_shape(
            run.segments, renderer, trajectory_id="traj-0", task_id="task-0", max_images=keep + removal
        )
        == []
    )
    # the rollout engine never sees more than K + Delta screenshots either
    assert max(len(images) for _, images in run.prompts) <= keep + removal
    with_images = sum(t.observation is not None and t.observation.screenshot is not None for t in episode.turns)
    # O(T / K): one segment per Delta new screenshots beyond the first K + Delta
    assert len(run.segments) <= 1 + math.ceil(max(with_images - keep - removal + 1, 0) / removal)
    if spec["screenshot_rate"] == 1.0:
        assert len(run.segments) == expected_sliding_segments(
            spec["turns"], episode.observations, keep, removal
        )
        assert run.context.prunes in (len(run.segments) - 1, len(run.segments))


@settings(max_examples=25, deadline=None)
@given(spec=episodes)
def test_trajectory_invariants(renderer, spec):
    episode = make_episode(renderer, spec)
    run = run_episode(TrajectorySegmenter(), renderer, episode, after_observation=check_stream_matches_template)
    assert run.problems == []
    assert len(run.segments) == 1
    assert check_trained_once(run.segments, episode.responses) == []
    assert check_prompts_precede_responses(run.segments, run.prompts, episode.responses) == []
    assert check_segment_shape(run.segments, renderer, trajectory_id="traj-0", task_id="task-0") == []
    # every screenshot up to the last response, in order
    seen = [episode.first.screenshot] + [
        t.observation.screenshot for t in episode.turns[:-1] if t.observation and t.observation.screenshot
    ]
    assert run.segments[0].images == seen


@settings(max_examples=25, deadline=None)
@given(spec=episodes)
def test_step_wise_invariants(renderer, spec):
    episode = make_episode(renderer, spec)
    run = run_episode(StepWiseSegmenter(), renderer, episode)
    assert len(run.segments) == spec["turns"]
    assert check_trained_once(run.segments, episode.responses) == []
    assert check_prompts_precede_responses(run.segments, run.prompts, episode.responses) == []
    assert check_segment_shape(run.segments, renderer, trajectory_id="traj-0", task_id="task-0", max_images=1) == []
    latest = episode.first.screenshot
    for turn, segment in zip(episode.turns, run.segments):
        # exactly the latest screenshot, and all earlier responses as text
        assert segment.images == [latest]
        if turn.observation is not None and turn.observation.screenshot is not None:
            latest = turn.observation.screenshot
    last_text = renderer.decode(run.segments[-1].input_ids)
    position = 0
    for response in episode.responses[:-1]:
        text = response.text.removesuffix("<|im_end|>").removesuffix("<|endoftext|>")
        position = last_text.index(text, position) + len(text)


@settings(max_examples=15, deadline=None)
@given(spec=episodes, window=windows)
def test_text_level_diff_equals_full_rendering_diff(renderer, spec, window):
    """The renderer's text-level diff (fast path) gives the same streams as diffing full id renderings."""
    from segmenters.stream import TokenDiff

    episode = make_episode(renderer, spec)
    options = SlidingWindowOptions(keep_images=window[0], min_removal=window[1])
    fast, generic = SlidingWindowSegmenter(options), SlidingWindowSegmenter(options)
    generic._diffs[renderer] = TokenDiff(renderer, text_level=False)
    a, b = run_episode(fast, renderer, episode), run_episode(generic, renderer, episode)
    assert a.prompts == b.prompts
    assert [s.input_ids for s in a.segments] == [s.input_ids for s in b.segments]
    assert generic._diffs[renderer].rewrites == 0
