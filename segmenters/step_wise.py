"""Step-wise decomposition: one training item per turn (the baseline the paper's sliding window beats).

At every turn the policy sees the text history (earlier screenshots replaced
by a marker) plus only the latest screenshot; that rendering, followed by the
sampled response, is the turn's training item.
"""

from __future__ import annotations

from typing import Sequence

from pydantic import BaseModel, ConfigDict, Field

from core.interfaces import ChatRenderer, EpisodeContext, RenderedPrompt, Segmenter
from core.types import Observation, Screenshot, Segment
from segmenters.prompt import (
    DEFAULT_MARKER,
    assistant_message,
    initial_messages,
    keep_latest_image,
    observation_message,
    response_text,
)
from segmenters.windowed import EpisodeState


class StepWiseOptions(BaseModel):
    """Options of ``step-wise``."""

    model_config = ConfigDict(extra="forbid")

    marker: str = Field(DEFAULT_MARKER, min_length=1, description="text that stands in for an earlier screenshot")


class StepWiseEpisode(EpisodeState, EpisodeContext):
    def __init__(
        self, *, renderer: ChatRenderer, trajectory_id: str, task_id: str, history: list, marker: str
    ) -> None:
        super().__init__(renderer, trajectory_id, task_id)
        self.history = history
        self.marker = marker
        self._prompt: RenderedPrompt | None = None
        self._last_item_tokens = 0

    def view(self) -> list:
        """What the policy sees this turn: the history with only the latest screenshot."""
        return keep_latest_image(self.history, self.marker)

    def _current(self) -> RenderedPrompt:
        if self._prompt is None:
            self._prompt = self.renderer.render(self.view(), add_generation_prompt=True)
        return self._prompt

    def prompt(self) -> tuple[list[int], list[Screenshot]]:
        self._expect("response", "prompt()")
        current = self._current()
        return list(current.ids), list(current.images)

    def add_response(self, ids: Sequence[int], logprobs: Sequence[float], text: str) -> None:
        self._expect("response", "add_response()")
        self._check_response(ids, logprobs)
        context = self._current()
        self._last_item_tokens = len(context.ids) + len(ids)
        if ids:
            n = len(context.ids)
            self.segments.append(
                Segment(
                    trajectory_id=self.trajectory_id,
                    task_id=self.task_id,
                    index=len(self.segments),
                    input_ids=[*context.ids, *ids],
                    loss_mask=[0] * n + [1] * len(ids),
                    rollout_logprobs=[0.0] * n + [float(x) for x in logprobs],
                    images=list(context.images),
                    responses=[(self.turn, n, n + len(ids))],
                )
            )
        self.history.append(assistant_message(response_text(self.renderer, ids, text)))
        self._prompt = None
        self.turn += 1
        self._awaiting = "observation"

    def add_observation(self, observation: Observation, feedback: str | None = None) -> None:
        self._expect("observation", "add_observation()")
        self.history.append(observation_message(observation, feedback))
        self._prompt = None
        self._awaiting = "response"

    def finish(self) -> list[Segment]:
        self._finished = True
        return list(self.segments)

    @property
    def num_tokens(self) -> int:
        return len(self._current().ids) if self._awaiting == "response" else self._last_item_tokens


class StepWiseSegmenter(Segmenter):
    """One training item per turn: text history plus the latest screenshot."""

    def __init__(self, options: StepWiseOptions | None = None, **_: object) -> None:
        self.options = options or StepWiseOptions()

    def start(
        self,
        *,
        renderer: ChatRenderer,
        trajectory_id: str,
        task_id: str,
        system_prompt: str,
        instruction: str,
        observation: Observation,
    ) -> StepWiseEpisode:
        return StepWiseEpisode(
            renderer=renderer,
            trajectory_id=trajectory_id,
            task_id=task_id,
            history=initial_messages(system_prompt, instruction, observation),
            marker=self.options.marker,
        )
