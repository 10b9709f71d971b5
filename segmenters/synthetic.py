"""Synthetic episodes replayed through a segmenter (property tests, ``bench/segmentation.py``).

An episode is what a rollout produces: per turn the sampled response (ids,
logprobs, text) and the observation that followed. Responses are built from
word encodings, so their ids are sometimes *not* the tokenizer's own
tokenization of their text, as with a real policy.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from core.interfaces import ChatRenderer, EpisodeContext, Segmenter
from core.types import Observation, Screenshot, Segment
from segmenters.checks import SampledResponse

WORDS = (
    "the file menu opens and I click the button at cell B12 to type value 42 then press enter "
    "left_click(x=512, y=384) type(text=\"=SUM(B2:B11)\") key(keys=['ctrl', 's']) scroll done() "
    "spreadsheet window dialog Save As report.odt terminal output déjà vu 数据 ✓ {\"x\": 10}"
).split()


@dataclass
class SyntheticTurn:
    response: SampledResponse
    observation: Observation | None  # None: the episode ended after this response
    feedback: str | None = None


@dataclass
class SyntheticEpisode:
    system_prompt: str
    instruction: str
    first: Observation
    turns: list[SyntheticTurn]

    @property
    def responses(self) -> list[SampledResponse]:
        return [t.response for t in self.turns]

    @property
    def observations(self) -> int:
        return sum(t.observation is not None for t in self.turns)


@dataclass
class EpisodeRun:
    segments: list[Segment]
    prompts: list[tuple[list[int], list[Screenshot]]]  # what the policy saw before each response
    seconds: float  # wall time spent inside the segmenter
    cpu_seconds: float  # CPU time of this process inside the segmenter (robust to a busy machine)
    context: EpisodeContext
    problems: list[str] = field(default_factory=list)


def sample_response(
    renderer: ChatRenderer, rng: random.Random, words: int, *, canonical: bool, stop: int | None
) -> SampledResponse:
    """A response of ``words`` words; ``canonical`` False encodes word by word (other BPE boundaries)."""
    text = " ".join(rng.choice(WORDS) for _ in range(max(words, 1)))
    if canonical:
        ids = renderer.encode_text(text)
    else:
        pieces = text.split(" ")
        ids = [t for i, w in enumerate(pieces) for t in renderer.encode_text(w if i == 0 else " " + w)]
    if stop is not None:
        ids = ids + [stop]
    logprobs = [-rng.random() * 5 for _ in ids]
    return SampledResponse(ids=ids, logprobs=logprobs, text=renderer.decode(ids))


def random_episode(
    renderer: ChatRenderer,
    rng: random.Random,
    *,
    turns: int,
    screenshots: Sequence[Screenshot],
    screenshot_rate: float = 0.9,
    max_response_words: int = 40,
    final_observation: bool = True,
) -> SyntheticEpisode:
    out: list[SyntheticTurn] = []
    for index in range(turns):
        roll = rng.random()
        stop = None if roll < 0.1 else renderer.stop_ids[-1] if roll < 0.15 else renderer.stop_ids[0]
        response = sample_response(
            renderer, rng, rng.randint(1, max_response_words), canonical=rng.random() < 0.5, stop=stop
        )
        observation: Observation | None = None
        if index < turns - 1 or final_observation:
            shot = rng.choice(screenshots) if rng.random() < screenshot_rate else None
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))) or None
            observation = Observation(screenshot=shot, text=text)
        feedback = rng.choice([None, "Action executed.", "Error: could not parse the action."])
        out.append(SyntheticTurn(response, observation, feedback))
    first = Observation(screenshot=rng.choice(screenshots))
    instruction = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20)))
    return SyntheticEpisode("You are a computer-use agent. Actions: left_click(x, y), type(text), done().",
                            instruction, first, out)


def run_episode(
    segmenter: Segmenter,
    renderer: ChatRenderer,
    episode: SyntheticEpisode,
    *,
    trajectory_id: str = "traj-0",
    task_id: str = "task-0",
    after_observation: Callable[[EpisodeContext], list[str]] | None = None,
) -> EpisodeRun:
    """Drive ``segmenter`` through ``episode`` as the rollout loop would."""
    prompts: list[tuple[list[int], list[Screenshot]]] = []
    problems: list[str] = []
    spent = cpu = 0.0
    start, start_cpu = time.perf_counter(), time.process_time()
    context = segmenter.start(
        renderer=renderer,
        trajectory_id=trajectory_id,
        task_id=task_id,
        system_prompt=episode.system_prompt,
        instruction=episode.instruction,
        observation=episode.first,
    )
    spent, cpu = spent + time.perf_counter() - start, cpu + time.process_time() - start_cpu
    for turn in episode.turns:
        start, start_cpu = time.perf_counter(), time.process_time()
        prompts.append(context.prompt())
        context.add_response(turn.response.ids, turn.response.logprobs, turn.response.text)
        if turn.observation is not None:
            context.add_observation(turn.observation, turn.feedback)
        spent, cpu = spent + time.perf_counter() - start, cpu + time.process_time() - start_cpu
        if turn.observation is not None and after_observation is not None:
            problems.extend(after_observation(context))
    start, start_cpu = time.perf_counter(), time.process_time()
    segments = context.finish()
    spent, cpu = spent + time.perf_counter() - start, cpu + time.process_time() - start_cpu
    return EpisodeRun(segments, prompts, spent, cpu, context, problems)
