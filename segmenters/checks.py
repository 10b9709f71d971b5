"""Invariant checks of segmenter output, shared by the property tests and ``bench/segmentation.py``.

Each check returns a list of problems (empty when the invariant holds) so a
benchmark can count mismatches and a test can show them.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from core.interfaces import ChatRenderer
from core.types import Screenshot, Segment
from segmenters.stream import image_runs
from segmenters.windowed import StreamEpisode


@dataclass
class SampledResponse:
    """What the rollout engine returned for one turn."""

    ids: list[int]
    logprobs: list[float]
    text: str


@dataclass
class TrainedRun:
    """A maximal run of mask-1 tokens: ids[start:start + len(ids)] of a segment."""

    start: int
    ids: list[int]
    logprobs: list[float]


def trained_runs(segment: Segment) -> list[TrainedRun]:
    """The maximal runs of mask-1 tokens of a segment."""
    mask = np.asarray(segment.loss_mask, dtype=np.int8) != 0
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [
        TrainedRun(int(a), segment.input_ids[a:b], [float(x) for x in segment.rollout_logprobs[a:b]])
        for a, b in zip(starts, ends)
    ]


def check_trained_once(segments: Sequence[Segment], responses: Sequence[SampledResponse]) -> list[str]:
    """Every response is trained in exactly one segment, whole, in order, with the logprobs it was sampled with,
    and recorded there (``Segment.responses``) under its turn."""
    problems: list[str] = []
    runs = [(seg.index, run) for seg in segments for run in trained_runs(seg)]
    expected = [r for r in responses if r.ids]
    if len(runs) != len(expected):
        problems.append(f"{len(runs)} trained runs across segments for {len(expected)} non-empty responses")
    for turn, ((index, run), response) in enumerate(zip(runs, expected)):
        if run.ids != response.ids:
            problems.append(f"response {turn}: trained ids in segment {index} differ from the sampled ids")
        elif run.logprobs != [float(x) for x in response.logprobs]:
            problems.append(f"response {turn}: logprobs in segment {index} differ from the sampled logprobs")
    # each segment records where its responses sit (Segment.responses), by turn
    spans = [(turn, seg.index, start, end) for seg in segments for turn, start, end in seg.responses if end > start]
    turns = [turn for turn, r in enumerate(responses) if r.ids]
    if [span[0] for span in spans] != turns:
        problems.append(f"segments record responses of turns {[span[0] for span in spans]}, sampled: {turns}")
    for (turn, index, start, end), (run_index, run) in zip(spans, runs):
        if (index, start, end) != (run_index, run.start, run.start + len(run.ids)):
            problems.append(f"response {turn}: recorded at segment {index} [{start}, {end}), trained at segment "
                            f"{run_index} [{run.start}, {run.start + len(run.ids)})")
    return problems


def check_prompts_precede_responses(
    segments: Sequence[Segment],
    prompts: Sequence[tuple[list[int], list[Screenshot]]],
    responses: Sequence[SampledResponse],
) -> list[str]:
    """In its segment, each response follows exactly the ids and images the policy generated it from."""
    problems: list[str] = []
    turns = [turn for turn, r in enumerate(responses) if r.ids]
    runs = [(seg, run) for seg in segments for run in trained_runs(seg)]
    for turn, (seg, run) in zip(turns, runs):
        prompt_ids, prompt_images = prompts[turn]
        if seg.input_ids[: run.start] != prompt_ids:
            problems.append(f"turn {turn}: segment {seg.index} does not hold the prompt before the response")
        if seg.images[: len(prompt_images)] != prompt_images:
            problems.append(f"turn {turn}: segment {seg.index} images differ from the prompt's images")
    return problems


def check_segment_shape(
    segments: Sequence[Segment],
    renderer: ChatRenderer,
    *,
    trajectory_id: str,
    task_id: str,
    max_images: int | None = None,
) -> list[str]:
    """Ids, indexes, masks, logprobs and image placeholders of each segment are consistent."""
    problems: list[str] = []
    for position, seg in enumerate(segments):
        name = f"segment {position}"
        if (seg.trajectory_id, seg.task_id, seg.index) != (trajectory_id, task_id, position):
            problems.append(f"{name}: carries ({seg.trajectory_id}, {seg.task_id}, #{seg.index})")
        mask = np.asarray(seg.loss_mask)
        if not np.isin(mask, (0, 1)).all():
            problems.append(f"{name}: loss mask values other than 0/1")
        if np.any(np.asarray(seg.rollout_logprobs, dtype=np.float64)[mask == 0] != 0.0):
            problems.append(f"{name}: non-zero rollout logprob on a context token")
        if not any(seg.loss_mask):
            problems.append(f"{name}: nothing to train")
        runs = image_runs(seg.input_ids, renderer.image_pad_id)
        wanted = [renderer.image_tokens(image) for image in seg.images]
        if runs != wanted:
            problems.append(f"{name}: placeholder runs {runs} do not match its images' token counts {wanted}")
        if max_images is not None and len(seg.images) > max_images:
            problems.append(f"{name}: {len(seg.images)} images, more than the window's {max_images}")
    return problems


def check_stream_matches_template(context: StreamEpisode) -> list[str]:
    """The stream spells exactly the chat template's text of the current history (placeholders expanded).

    Compared as text because sampled ids need not be the tokenizer's own
    tokenization of the response (a response that stopped on another stop
    token, e.g. ``<|endoftext|>``, is read as ending the turn the template's
    way); right after a (re-)tokenization the ids must be identical too.
    """
    renderer = context.renderer
    problems: list[str] = []
    if not context.stream.responses:
        if context.stream.ids != renderer.render(context.history, add_generation_prompt=True).ids:
            problems.append(f"turn {context.turn}: freshly tokenized stream differs from the template's ids")
    ids = list(context.stream.ids)
    closing = context.diff.closing
    for span in context.stream.responses:
        if closing and span.stopped:
            ids[span.end - 1] = closing[0]
    # Text compared with one placeholder per image (decoding thousands of pads is slow), runs compared apart.
    stream_text, stream_runs = _collapsed(renderer, ids)
    render_text = getattr(renderer, "render_text", None)
    if render_text is not None:  # the template's own text (one placeholder per image), no tokenizer involved
        template_text = render_text(context.history, add_generation_prompt=True)
        images = [part for m in context.history for part in m.content if isinstance(part, Screenshot)]
    else:
        rendered = renderer.render(context.history, add_generation_prompt=True)
        template_text, images = _collapsed(renderer, rendered.ids)[0], rendered.images
    if stream_runs != [renderer.image_tokens(image) for image in images]:
        problems.append(f"turn {context.turn}: stream image placeholders differ from the template's")
    if unicodedata.normalize("NFC", stream_text) != unicodedata.normalize("NFC", template_text):
        problems.append(f"turn {context.turn}: stream text differs from the template's rendering of the history")
    if context.stream.images != images:
        problems.append(f"turn {context.turn}: stream images differ from the history's kept screenshots")
    return problems


def _collapsed(renderer: ChatRenderer, ids: Sequence[int]) -> tuple[str, list[int]]:
    """Decoded text with one placeholder per image, and the placeholder run lengths."""
    array = np.asarray(ids, dtype=np.int64)
    is_pad = array == renderer.image_pad_id
    edges = np.diff(np.concatenate(([0], is_pad.astype(np.int8), [0])))
    runs = (np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).tolist()
    repeat = np.zeros_like(is_pad)
    repeat[1:] = is_pad[1:] & is_pad[:-1]
    return renderer.decode(array[~repeat].tolist()), runs


def expected_sliding_segments(turns: int, observations: int, keep: int, removal: int) -> int:
    """Segments of an episode where every observation brings a screenshot and every response has tokens.

    Prunings happen at observations K+Delta, K+2*Delta, ...; the stream after
    the last one becomes a segment only if a response followed it.
    """
    if observations < keep + removal:
        return 1
    prunes = 1 + (observations - keep - removal) // removal
    last_prune = keep + removal + (prunes - 1) * removal
    return prunes + (1 if turns > last_prune else 0)
