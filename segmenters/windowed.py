"""Sliding-window (Visual Context Segmentation, Algorithms 1-2) and whole-trajectory segmenters.

Both keep one growing token-ID stream per episode. The sliding window bounds
it: when the kept screenshots would exceed K + Delta, the stream so far becomes
a training segment, the oldest Delta screenshots leave the history (a text
marker stands in for each), and the remaining history is re-tokenized as a
fresh stream of context (mask 0, logprob 0). Earlier responses are then only
context, so every response is trained in exactly one segment. The trajectory
segmenter never prunes: one item with every screenshot.
"""

from __future__ import annotations

import weakref
from typing import Sequence

from pydantic import BaseModel, ConfigDict, Field

from core.interfaces import ChatRenderer, EpisodeContext, Message, Segmenter
from core.types import Observation, Screenshot, Segment
from segmenters.prompt import (
    DEFAULT_MARKER,
    assistant_message,
    count_images,
    drop_oldest_images,
    initial_messages,
    observation_message,
    response_text,
)
from segmenters.stream import TokenDiff, TokenStream


class SlidingWindowOptions(BaseModel):
    """Options of ``sliding-window`` (paper defaults: K = 5 on OSWorld, 8 on ScienceBoard; Delta = 5)."""

    model_config = ConfigDict(extra="forbid")

    keep_images: int = Field(5, ge=1, description="K: screenshots kept in the context after a pruning")
    min_removal: int = Field(
        5, ge=1, description="Delta: screenshots dropped at once; pruning starts when more than K + Delta are kept"
    )
    marker: str = Field(DEFAULT_MARKER, min_length=1, description="text that stands in for a dropped screenshot")


class EpisodeState:
    """The turn protocol every episode context follows: prompt -> response -> observation -> prompt ..."""

    def __init__(self, renderer: ChatRenderer, trajectory_id: str, task_id: str) -> None:
        self.renderer = renderer
        self.trajectory_id = trajectory_id
        self.task_id = task_id
        self.turn = 0
        self.segments: list[Segment] = []
        self._awaiting = "response"
        self._finished = False

    def _expect(self, awaiting: str, call: str) -> None:
        if self._finished:
            raise RuntimeError(f"trajectory {self.trajectory_id}: {call} after finish()")
        if self._awaiting != awaiting:
            raise RuntimeError(
                f"trajectory {self.trajectory_id}: {call} while waiting for the {self._awaiting}; turns go "
                "prompt() -> add_response() -> add_observation() -> prompt() ..."
            )

    def _check_response(self, ids: Sequence[int], logprobs: Sequence[float]) -> None:
        if len(ids) != len(logprobs):
            raise ValueError(
                f"trajectory {self.trajectory_id} turn {self.turn}: {len(ids)} response ids but "
                f"{len(logprobs)} logprobs; the engine must return one logprob per sampled token"
            )


class StreamEpisode(EpisodeState, EpisodeContext):
    """One episode's token-ID stream, optionally pruned by a (K, Delta) screenshot window."""

    def __init__(
        self,
        *,
        renderer: ChatRenderer,
        diff: TokenDiff,
        trajectory_id: str,
        task_id: str,
        history: list[Message],
        window: tuple[int, int] | None,
        marker: str = DEFAULT_MARKER,
    ) -> None:
        super().__init__(renderer, trajectory_id, task_id)
        self.diff = diff
        self.window = window
        self.marker = marker
        #: the text history (with the screenshots still kept) the stream renders
        self.history = history
        self.stream = self._fresh_stream()
        self.kept_images = count_images(history)
        self.prunes = 0
        self._last_response: list[int] = []

    def _fresh_stream(self) -> TokenStream:
        rendered = self.renderer.render(self.history, add_generation_prompt=True)
        return TokenStream.fresh(rendered.ids, rendered.images)

    def prompt(self) -> tuple[list[int], list[Screenshot]]:
        self._expect("response", "prompt()")
        return list(self.stream.ids), list(self.stream.images)

    def add_response(self, ids: Sequence[int], logprobs: Sequence[float], text: str) -> None:
        self._expect("response", "add_response()")
        self._check_response(ids, logprobs)
        text = response_text(self.renderer, ids, text)
        stopped = bool(ids) and ids[-1] in self.renderer.stop_ids
        self.stream.append_response(self.turn, ids, logprobs, text, stopped)
        self.history.append(assistant_message(text))
        self._last_response = list(ids)
        self.turn += 1
        self._awaiting = "observation"

    def add_observation(self, observation: Observation, feedback: str | None = None) -> None:
        self._expect("observation", "add_observation()")
        message = observation_message(observation, feedback)
        incoming = count_images([message])
        if self.window is not None and self.kept_images + incoming > sum(self.window):
            # Algorithm 2, lines 9-12: save the segment, drop the oldest Delta screenshots, re-tokenize.
            self._save_segment()
            self.history = drop_oldest_images([*self.history, message], self.window[1], self.marker)
            self.kept_images = count_images(self.history)
            self.stream = self._fresh_stream()
            self.prunes += 1
        else:
            # Lines 14-16: append only the new observation's tokens.
            closing = self.diff.after_response(self._last_response)
            ids, images = self.diff.observation(self.history, message)
            self.stream.append_context(closing + ids, images)
            self.history.append(message)
            self.kept_images += incoming
        self._awaiting = "response"

    def _save_segment(self) -> None:
        if self.stream.num_trainable:
            index = len(self.segments)
            self.segments.append(self.stream.to_segment(self.renderer, self.trajectory_id, self.task_id, index))

    def finish(self) -> list[Segment]:
        if not self._finished:
            self._save_segment()
            self._finished = True
        return list(self.segments)

    @property
    def num_tokens(self) -> int:
        return len(self.stream.ids)


class _StreamSegmenter(Segmenter):
    window: tuple[int, int] | None = None
    marker: str = DEFAULT_MARKER

    def __init__(self) -> None:
        # One probe of the template per renderer, not per episode.
        self._diffs: weakref.WeakKeyDictionary[ChatRenderer, TokenDiff] = weakref.WeakKeyDictionary()

    def _diff(self, renderer: ChatRenderer) -> TokenDiff:
        diff = self._diffs.get(renderer)
        if diff is None:
            diff = self._diffs[renderer] = TokenDiff(renderer)
        return diff

    def start(
        self,
        *,
        renderer: ChatRenderer,
        trajectory_id: str,
        task_id: str,
        system_prompt: str,
        instruction: str,
        observation: Observation,
    ) -> StreamEpisode:
        return StreamEpisode(
            renderer=renderer,
            diff=self._diff(renderer),
            trajectory_id=trajectory_id,
            task_id=task_id,
            history=initial_messages(system_prompt, instruction, observation),
            window=self.window,
            marker=self.marker,
        )


class SlidingWindowSegmenter(_StreamSegmenter):
    """Visual Context Segmentation: a token-ID stream pruned to a window of recent screenshots."""

    def __init__(self, options: SlidingWindowOptions | None = None, **_: object) -> None:
        super().__init__()
        self.options = options or SlidingWindowOptions()
        self.window = (self.options.keep_images, self.options.min_removal)
        self.marker = self.options.marker


class TrajectorySegmenter(_StreamSegmenter):
    """One training item per episode with every screenshot (no pruning)."""

    def __init__(self, options: BaseModel | None = None, **_: object) -> None:
        super().__init__()
