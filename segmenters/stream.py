"""The token-ID stream of an episode and the token diffs that grow it (the paper's appendix C.1).

A :class:`TokenStream` is the running (ids, loss mask, rollout logprobs) of
one training item plus its images and where each response sits. Responses are
appended exactly as sampled (mask 1, their logprobs); everything else is
appended with mask 0 and logprob 0 as the *difference* between two chat
template renderings, so tokens already in the stream are never re-tokenized.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import structlog

from core.interfaces import ChatRenderer, Message
from core.types import Screenshot, Segment
from segmenters.prompt import assistant_message

log = structlog.get_logger(__name__)


class TemplateError(ValueError):
    pass


@dataclass
class ResponseSpan:
    """Where the response of ``turn`` sits in a stream: ids[start:end]."""

    turn: int
    start: int
    end: int
    text: str
    stopped: bool  # ended with a stop token


@dataclass
class TokenStream:
    ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    images: list[Screenshot] = field(default_factory=list)
    responses: list[ResponseSpan] = field(default_factory=list)

    @classmethod
    def fresh(cls, ids: Sequence[int], images: Sequence[Screenshot]) -> TokenStream:
        """A stream of context only (mask 0, logprob 0): a (re-)tokenized history."""
        return cls(list(ids), [0] * len(ids), [0.0] * len(ids), list(images))

    def append_context(self, ids: Sequence[int], images: Sequence[Screenshot] = ()) -> None:
        self.ids.extend(ids)
        self.loss_mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))
        self.images.extend(images)

    def append_response(
        self, turn: int, ids: Sequence[int], logprobs: Sequence[float], text: str, stopped: bool
    ) -> None:
        start = len(self.ids)
        self.ids.extend(ids)
        self.loss_mask.extend([1] * len(ids))
        self.logprobs.extend(float(x) for x in logprobs)
        self.responses.append(ResponseSpan(turn, start, len(self.ids), text, stopped))

    @property
    def num_trainable(self) -> int:
        return sum(span.end - span.start for span in self.responses)

    def to_segment(self, renderer: ChatRenderer, trajectory_id: str, task_id: str, index: int) -> Segment:
        """The stream as a training item, cut after its last response (later context trains nothing)."""
        end = self.responses[-1].end if self.responses else len(self.ids)
        ids = self.ids[:end]
        return Segment(
            trajectory_id=trajectory_id,
            task_id=task_id,
            index=index,
            input_ids=ids,
            loss_mask=self.loss_mask[:end],
            rollout_logprobs=self.logprobs[:end],
            images=self.images[: images_within(renderer, self.images, ids.count(renderer.image_pad_id))],
            responses=[(span.turn, span.start, span.end) for span in self.responses],
        )


def images_within(renderer: ChatRenderer, images: Sequence[Screenshot], pads: int) -> int:
    """How many of ``images`` (in order) have their placeholders among the first ``pads`` pad tokens."""
    kept = 0
    for image in images:
        pads -= renderer.image_tokens(image)
        if pads < 0:
            break
        kept += 1
    return kept


def image_runs(ids: Sequence[int], pad_id: int) -> list[int]:
    """Lengths of the runs of image placeholders in ``ids``."""
    import numpy as np

    is_pad = np.asarray(ids, dtype=np.int64) == pad_id
    if not is_pad.any():
        return []
    edges = np.diff(np.concatenate(([0], is_pad.astype(np.int8), [0])))
    return (np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).tolist()


class TokenDiff:
    """Token diffs of chat-template renderings, over any :class:`ChatRenderer`.

    ``observation(history, message)`` is Algorithm 2's
    ``Tokenize(H + o)[len(Tokenize(H)):]``. Templates that rewrite earlier turns
    when a message is appended (e.g. thinking templates that drop old
    reasoning) have no such diff; then the message is rendered after the system
    message alone, as verl's agent loop does, and the stream keeps the ids the
    policy actually saw.
    """

    def __init__(self, renderer: ChatRenderer, *, text_level: bool = True) -> None:
        self.renderer = renderer
        self.closing = self._assistant_closing()
        self.rewrites = 0
        # A renderer may offer the same diff computed on the template text (no full re-tokenization per turn).
        self._appended = getattr(renderer, "render_appended", None) if text_level else None

    def _assistant_closing(self) -> list[int]:
        """What the template puts after an assistant message's text, from the stop token on (``<|im_end|>\\n``)."""
        probe = [Message("user", ["?"])]
        prompt = self.renderer.render(probe, add_generation_prompt=True).ids
        closed = self.renderer.render([*probe, assistant_message("ok")], add_generation_prompt=False).ids
        if closed[: len(prompt)] != prompt:
            raise TemplateError(
                "the chat template renders an assistant turn that does not continue its own generation prompt; "
                "the token-ID stream cannot follow it"
            )
        tail = closed[len(prompt) :]
        stops = [i for i, token in enumerate(tail) if token in self.renderer.stop_ids]
        return tail[stops[-1] :] if stops else []

    def after_response(self, response_ids: Sequence[int]) -> list[int]:
        """Ids that close the assistant turn after a sampled response (the rest of the template's closing)."""
        if self.closing and response_ids and response_ids[-1] in self.renderer.stop_ids:
            return self.closing[1:]
        return list(self.closing)  # cut at max_new_tokens: close the turn as the template would

    def observation(self, history: Sequence[Message], message: Message) -> tuple[list[int], list[Screenshot]]:
        """Ids (with generation prompt) and images that appending ``message`` to ``history`` adds."""
        if self._appended is not None:
            appended = self._appended(history, [message], add_generation_prompt=True)
            if appended is not None:
                return appended.ids, appended.images
        before = self.renderer.render(history, add_generation_prompt=False)
        after = self.renderer.render([*history, message], add_generation_prompt=True)
        n = len(before.ids)
        if after.ids[:n] == before.ids:
            return after.ids[n:], after.images[len(before.images) :]
        self.rewrites += 1
        if self.rewrites == 1:
            log.info("chat template rewrites earlier turns; appending observations rendered after the system turn")
        system = [m for m in history[:1] if m.role == "system"]
        base = self.renderer.render(system, add_generation_prompt=False) if system else None
        alone = self.renderer.render([*system, message], add_generation_prompt=True)
        cut = len(base.ids) if base is not None else 0
        if base is not None and alone.ids[:cut] != base.ids:
            raise TemplateError("the chat template renders a user turn differently depending on what follows it")
        return alone.ids[cut:], alone.images[len(base.images) if base is not None else 0 :]
