"""Qwen-VL chat rendering: messages -> token ids exactly as the chat template produces them.

The template is rendered with one ``<|image_pad|>`` per image and tokenized;
each pad is then expanded into the screenshot's visual-token count. Added
tokens are matched before BPE runs and the text between them is tokenized
piece by piece, so this equals tokenizing the text with the pads expanded in
place. Segmenters re-render whole conversations every turn, so the pieces
(message bodies) are tokenized once and cached, and the template is rendered
with its compiled Jinja object directly rather than through
``apply_chat_template``'s per-call conversation copying.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Sequence

from core.interfaces import ChatRenderer, Message, RenderedPrompt
from core.types import Screenshot
from plugins.qwen_vl.tokenizer import QWEN_SPECIAL_TOKENS
from plugins.qwen_vl.vision import ImageProcessor

IMAGE_PAD = "<|image_pad|>"
#: Qwen-VL tokens a policy must never sample: they would open a vision span or break the chat structure
#: (every special token except the two that end a turn).
SUPPRESSED_TOKENS = tuple(t for t in QWEN_SPECIAL_TOKENS if t not in ("<|endoftext|>", "<|im_end|>"))


class RenderError(ValueError):
    pass


class QwenVLRenderer(ChatRenderer):
    """A :class:`ChatRenderer` over a Hugging Face tokenizer with a Qwen-VL chat template."""

    def __init__(self, tokenizer: Any, image_processor: ImageProcessor) -> None:
        self.tokenizer = tokenizer
        self.image_processor = image_processor
        vocab = tokenizer.get_vocab()
        self.image_pad_id = _token_id(vocab, IMAGE_PAD)
        stops = [_token_id(vocab, "<|im_end|>")]
        if "<|endoftext|>" in vocab:
            stops.append(vocab["<|endoftext|>"])
        self.stop_ids = tuple(stops)
        #: token ids a rollout must suppress (see :data:`SUPPRESSED_TOKENS`)
        self.suppress_ids: tuple[int, ...] = tuple(vocab[t] for t in SUPPRESSED_TOKENS if t in vocab)
        self.tokenizer_size: int | None = len(tokenizer)
        self.pad_token_id: int = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[-1]
        self._template = _compiled_template(tokenizer)
        self._template_vars = dict(getattr(tokenizer, "special_tokens_map", {}) or {})
        self._added_ids, self._added_split = _added_token_splitter(tokenizer)
        self._encode_piece = lru_cache(maxsize=16384)(self._encode_piece_uncached)
        self._backend = _plain_decoder(tokenizer)

    # -- ChatRenderer ---------------------------------------------------------------

    def render(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> RenderedPrompt:
        text = self.render_text(messages, add_generation_prompt=add_generation_prompt)
        images = [part for m in messages for part in m.content if isinstance(part, Screenshot)]
        ids = self.encode_template_text(text)
        return RenderedPrompt(ids=self.expand_image_pads(ids, images), images=images)

    def image_tokens(self, screenshot: Screenshot) -> int:
        return self.image_processor.image_token_count(screenshot)

    def encode_text(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        if self._backend is not None:
            return self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens)
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    # -- helpers --------------------------------------------------------------------

    def render_text(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
        """The chat template's text with one ``<|image_pad|>`` per image."""
        conversation = [to_hf_message(m) for m in messages]
        if self._template is None:
            return self.tokenizer.apply_chat_template(
                conversation, tokenize=False, add_generation_prompt=add_generation_prompt
            )
        return self._template.render(
            messages=conversation,
            tools=None,
            documents=None,
            add_generation_prompt=add_generation_prompt,
            **self._template_vars,
        )

    def render_appended(
        self, messages: Sequence[Message], new_messages: Sequence[Message], *, add_generation_prompt: bool
    ) -> RenderedPrompt | None:
        """What rendering ``messages + new_messages`` adds after rendering ``messages`` (no generation prompt).

        Works on the template text and tokenizes only the added text, which is
        exact when the added text begins with an added token (``<|im_start|>``):
        tokenization never crosses one. None when the template does not simply
        append (it rewrote earlier text); callers then diff full renderings.
        """
        before = self.render_text(messages, add_generation_prompt=False)
        after = self.render_text([*messages, *new_messages], add_generation_prompt=add_generation_prompt)
        if self._added_split is None or not after.startswith(before):
            return None
        suffix = after[len(before) :]
        if suffix and not self._added_split.match(suffix):
            return None
        images = [part for m in new_messages for part in m.content if isinstance(part, Screenshot)]
        return RenderedPrompt(ids=self.expand_image_pads(self.encode_template_text(suffix), images), images=images)

    def encode_template_text(self, text: str) -> list[int]:
        """``tokenizer.encode(text)``, tokenizing the pieces between added tokens once each (cached)."""
        if self._added_split is None:
            return list(self.tokenizer.encode(text, add_special_tokens=False))
        ids: list[int] = []
        for index, piece in enumerate(self._added_split.split(text)):
            if index % 2:  # the capture group: an added token
                ids.append(self._added_ids[piece])
            elif piece:
                ids.extend(self._encode_piece(piece))
        return ids

    def _encode_piece_uncached(self, piece: str) -> tuple[int, ...]:
        return tuple(self.tokenizer.encode(piece, add_special_tokens=False))

    def expand_image_pads(self, ids: Sequence[int], images: Sequence[Screenshot]) -> list[int]:
        """Replace the i-th ``<|image_pad|>`` with ``image_tokens(images[i])`` pads."""
        ids = list(ids)
        pad = self.image_pad_id
        out: list[int] = []
        start = 0
        for count, image in enumerate(images):
            try:
                at = ids.index(pad, start)  # C-speed search: conversations hold tens of thousands of ids
            except ValueError:
                raise RenderError(
                    f"the chat template emitted {count} image placeholders for {len(images)} images: "
                    "does the template render {'type': 'image'} content items?"
                ) from None
            out.extend(ids[start:at])
            out.extend([pad] * self.image_tokens(image))
            start = at + 1
        rest = ids[start:]
        if pad in rest:
            raise RenderError(
                f"the chat template emitted more image placeholders than the {len(images)} images given"
            )
        out.extend(rest)
        return out

    def image_pad_runs(self, ids: Sequence[int]) -> list[tuple[int, int]]:
        """(start, length) of each run of expanded placeholders in ``ids``."""
        return pad_runs(ids, self.image_pad_id)

    def collapse_image_pads(self, ids: Sequence[int]) -> list[int]:
        """One placeholder per image (vectorized: prompts hold thousands of pads per screenshot)."""
        import numpy as np

        array = np.asarray(ids, dtype=np.int64)
        if array.size == 0:
            return []
        is_pad = array == self.image_pad_id
        repeat = np.zeros_like(is_pad)
        repeat[1:] = is_pad[1:] & is_pad[:-1]
        return array[~repeat].tolist()


def pad_runs(ids: Sequence[int], pad_id: int) -> list[tuple[int, int]]:
    """(start, length) of each maximal run of ``pad_id`` in ``ids``."""
    import numpy as np

    is_pad = np.asarray(ids, dtype=np.int64) == pad_id
    if not is_pad.any():
        return []
    edges = np.diff(np.concatenate(([0], is_pad.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(a), int(b - a)) for a, b in zip(starts, ends)]


def to_hf_message(message: Message) -> dict[str, Any]:
    """A :class:`Message` in the structured-content form Qwen chat templates read."""
    if message.role not in ("system", "user", "assistant"):
        raise RenderError(f"message role {message.role!r} is not one of system, user, assistant")
    if all(isinstance(part, str) for part in message.content):
        # Text-only messages as plain strings: real Qwen templates parse e.g. <think> only in string content.
        return {"role": message.role, "content": "".join(message.content)}  # type: ignore[arg-type]
    content: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, Screenshot):
            content.append({"type": "image"})
        elif isinstance(part, str):
            content.append({"type": "text", "text": part})
        else:
            raise RenderError(f"message content must be str or Screenshot, got {type(part).__name__}")
    return {"role": message.role, "content": content}


def _compiled_template(tokenizer: Any) -> Any:
    """The tokenizer's chat template compiled the way transformers compiles it (None: use apply_chat_template)."""
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template
    except ImportError:  # private helper moved: fall back to the public (slower) path
        return None
    if not isinstance(tokenizer.chat_template, str):
        return None
    return _compile_jinja_template(tokenizer.chat_template)


def _added_token_splitter(tokenizer: Any) -> tuple[dict[str, int], re.Pattern[str] | None]:
    """A regex splitting text at added tokens, when the tokenizer splits there too (plain, non-normalized tokens)."""
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    plain = all(
        not (t.normalized or t.lstrip or t.rstrip or t.single_word) for t in decoder.values()
    )
    if not decoder or not plain:
        return {}, None
    ids = {token.content: index for index, token in decoder.items()}
    alternatives = "|".join(re.escape(t) for t in sorted(ids, key=len, reverse=True))
    return ids, re.compile(f"({alternatives})")


def _plain_decoder(tokenizer: Any) -> Any:
    """The Rust tokenizer when ``tokenizer.decode`` adds nothing to it (no space clean-up for BPE).

    ``PreTrainedTokenizerFast.decode`` first scans every id in Python, which
    dominates decoding the tens of thousands of ids of a multimodal conversation.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    bpe = type(backend.model).__name__ == "BPE"
    forced = getattr(tokenizer, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False)
    if getattr(tokenizer, "clean_up_tokenization_spaces", False) and not (bpe and not forced):
        return None
    return backend


def _token_id(vocab: dict[str, int], token: str) -> int:
    if token not in vocab:
        raise RenderError(f"the tokenizer has no {token} token: a Qwen-VL tokenizer is required")
    return vocab[token]
