"""Request parsing and response bodies of the OpenAI/vLLM API subset that ``plugins.serving`` speaks.

Engine-agnostic: everything goes through :class:`core.interfaces.ChatRenderer`
and :class:`core.interfaces.GenerationRequest`. A request that asks for
something the served policy does not do (greedy decoding, top-k, penalties,
stop strings, several choices, streaming) is refused with a 400 naming the
field, rather than silently sampling from a different distribution.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import time
import uuid
from typing import Any, Mapping, Sequence

from core.interfaces import ChatRenderer, Generation, GenerationRequest, Message
from core.types import Screenshot

DEFAULT_MAX_TOKENS = 16  # vLLM's completions default

#: response header naming the server process (a fresh id at every start; not a vLLM header): a client that
#: pushed weights sees from it that a restarted server answers, which holds the weights it loaded at start
INSTANCE_HEADER = "X-ScaleCUA-Instance"

#: fields accepted only with a value that leaves sampling unchanged
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "n": (None, 1), "best_of": (None, 1), "stream": (None, False), "echo": (None, False),
    "top_k": (None, 0, -1), "min_p": (None, 0, 0.0), "repetition_penalty": (None, 1, 1.0),
    "presence_penalty": (None, 0, 0.0), "frequency_penalty": (None, 0, 0.0), "use_beam_search": (None, False),
    "min_tokens": (None, 0), "ignore_eos": (None, False), "stop": (None, [], ""), "bad_words": (None, []),
    "allowed_token_ids": (None,), "logprob_token_ids": (None,), "prompt_logprobs": (None,),
    "structured_outputs": (None,), "response_format": (None,), "suffix": (None, ""), "tools": (None, []),
    "continue_final_message": (None, False), "priority": (None, 0), "prompt_embeds": (None,),
}


class BadRequest(Exception):
    """A client error: HTTP ``status`` with a message naming the field and the fix."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def error_body(message: str, status: int, param: str | None = None) -> dict[str, Any]:
    kind = {400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError", 409: "ConflictError",
            413: "RequestTooLargeError"}.get(status, "InternalServerError")
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


# -- sampling -----------------------------------------------------------------------------


def sampling_request(body: Mapping[str, Any], prompt_ids: list[int], images: list[Screenshot], *,
                     renderer: ChatRenderer, banned_ids: Sequence[int], max_tokens_key: str = "max_tokens",
                     where: str = "") -> GenerationRequest:
    """A :class:`GenerationRequest` from an OpenAI/vLLM body's sampling fields (``where`` prefixes field names)."""
    for key, neutral in _NEUTRAL.items():
        if key in body and body[key] not in neutral:
            raise BadRequest(f"{where}{key}={body[key]!r} is not supported: plugins.serving samples one choice from the "
                             "policy (temperature, top_p, seed, max tokens, stop token ids); remove the field",
                             param=where + key)
    temperature = _number(body, "temperature", 1.0, where)
    if temperature < 0:
        raise BadRequest(f"{where}temperature must be >= 0 (0: greedy decoding), got {temperature}",
                         param=where + "temperature")
    greedy = temperature == 0  # as vLLM: temperature 0 decodes greedily, logprobs of the raw logits
    temperature = 1.0 if greedy else temperature
    top_p = _number(body, "top_p", 1.0, where)
    if not 0 < top_p <= 1:
        raise BadRequest(f"{where}top_p must be in (0, 1], got {top_p}", param=where + "top_p")
    max_tokens = body.get(max_tokens_key)
    if max_tokens_key == "max_completion_tokens" and max_tokens is None:
        max_tokens = body.get("max_tokens")
    max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    if not _is_int(max_tokens) or max_tokens < 1:
        raise BadRequest(f"{where}{max_tokens_key} must be an integer >= 1, got {max_tokens!r}",
                         param=where + max_tokens_key)
    seed = body.get("seed")
    if seed is not None and not _is_int(seed):
        raise BadRequest(f"{where}seed must be an integer, got {seed!r}", param=where + "seed")
    stops = body.get("stop_token_ids") or []
    if not isinstance(stops, list) or not all(_is_int(s) and s >= 0 for s in stops):
        raise BadRequest(f"{where}stop_token_ids must be a list of token ids", param=where + "stop_token_ids")
    _check_logit_bias(body.get("logit_bias"), banned_ids, where)
    # the model's end-of-turn tokens always stop, as vLLM stops at EOS unless ignore_eos
    stop_ids = tuple(dict.fromkeys([*stops, *renderer.stop_ids]))
    return GenerationRequest(prompt_ids=prompt_ids, images=images, max_new_tokens=max_tokens,
                             temperature=temperature, top_p=top_p, stop_ids=stop_ids, seed=seed, greedy=greedy)


def check_logprobs_count(value: Any, field: str) -> bool:
    """True when sampled-token logprobs were asked for (``None``: not asked; 0: the sampled token only)."""
    if value is None or value is False:
        return False
    if value is True or value == 0:
        return True
    raise BadRequest(f"{field}={value!r}: only the sampled token's logprob is available (use 0)", param=field)


def _check_logit_bias(bias: Any, banned_ids: Sequence[int], where: str) -> None:
    if not bias:
        return
    if not isinstance(bias, Mapping):
        raise BadRequest(f"{where}logit_bias must be an object of token id -> bias", param=where + "logit_bias")
    banned = set(banned_ids)
    for key, value in bias.items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise BadRequest(f"{where}logit_bias key {key!r} is not a token id", param=where + "logit_bias") from None
        if not isinstance(value, (int, float)) or value > -100 or token not in banned:
            raise BadRequest(
                f"{where}logit_bias {{{key}: {value}}}: plugins.serving only accepts bans (<= -100) of the tokens its "
                f"policy never emits ({len(banned)} ids); other biases would change the policy",
                param=where + "logit_bias")


# -- prompts ------------------------------------------------------------------------------


def token_prompt(value: Any, vocab_size: int, field: str) -> list[int]:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]  # a batch of one prompt
    if not isinstance(value, list) or not value or not all(_is_int(t) for t in value):
        raise BadRequest(f"{field} must be a non-empty list of token ids (plugins.serving serves a token-stream policy; "
                         "one prompt per request)", param=field)
    bad = [t for t in value if not 0 <= t < vocab_size]
    if bad:
        raise BadRequest(f"{field}: token ids {bad[:5]} are outside the vocabulary (0..{vocab_size - 1})", param=field)
    return list(value)


def check_placeholders(ids: Sequence[int], images: Sequence[Screenshot], renderer: ChatRenderer,
                       field: str) -> list[tuple[int, int]]:
    """The pad runs of ``ids``, checked against the images' placeholder counts."""
    runs = pad_runs(ids, renderer.image_pad_id)
    if len(runs) != len(images):
        raise BadRequest(f"{field} holds {len(runs)} runs of image placeholders but {len(images)} images were sent",
                         param=field)
    for index, ((offset, length), image) in enumerate(zip(runs, images)):
        expected = renderer.image_tokens(image)
        if length != expected:
            raise BadRequest(f"{field}: image {index} ({image.width}x{image.height}) needs {expected} placeholder "
                             f"tokens but the run at {offset} has {length}", param=field)
    return runs


def pad_runs(ids: Sequence[int], pad_id: int) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    start = None
    for i, token in enumerate([*ids, -1]):
        if token == pad_id and start is None:
            start = i
        elif token != pad_id and start is not None:
            runs.append((start, i - start))
            start = None
    return runs


def parse_messages(value: Any) -> list[Message]:
    if not isinstance(value, list) or not value:
        raise BadRequest("messages must be a non-empty list", param="messages")
    out = []
    for i, raw in enumerate(value):
        if not isinstance(raw, Mapping) or raw.get("role") not in ("system", "user", "assistant"):
            raise BadRequest(f"messages[{i}] must have role system, user or assistant", param=f"messages[{i}]")
        content = raw.get("content")
        if isinstance(content, str):
            out.append(Message(raw["role"], [content]))
            continue
        if not isinstance(content, list):
            raise BadRequest(f"messages[{i}].content must be a string or a list of parts", param=f"messages[{i}]")
        parts: list[str | Screenshot] = []
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif kind == "image_url" and isinstance(part.get("image_url"), Mapping):
                parts.append(decode_image_url(part["image_url"].get("url"), where))
            else:
                raise BadRequest(f"{where} must be {{'type': 'text', 'text': ...}} or {{'type': 'image_url', "
                                 "'image_url': {'url': 'data:image/png;base64,...'}}", param=where)
        out.append(Message(raw["role"], parts))
    return out


def decode_image_url(url: Any, where: str) -> Screenshot:
    if not isinstance(url, str) or not url.startswith("data:image/") or ";base64," not in url:
        raise BadRequest(f"{where}: plugins.serving fetches no URLs; send the image inline as data:image/png;base64,...",
                         param=where)
    return decode_image(url.split(";base64,", 1)[1], where)


def decode_image(b64: Any, where: str) -> Screenshot:
    from PIL import Image, UnidentifiedImageError

    try:
        raw = base64.b64decode(b64, validate=True)
        with Image.open(io.BytesIO(raw)) as img:
            if img.format == "PNG":
                return Screenshot(png=raw, width=img.width, height=img.height)
            out = io.BytesIO()
            img.convert("RGB").save(out, format="PNG")
            return Screenshot(png=out.getvalue(), width=img.width, height=img.height)
    except (binascii.Error, ValueError, TypeError, UnidentifiedImageError, OSError) as exc:
        raise BadRequest(f"{where}: not a base64-encoded image ({exc})", param=where) from None


def encode_image_item(image: Screenshot) -> str:
    """The opaque ``kwargs_data`` item of one image (vLLM's are processed tensors; ours are the PNG)."""
    return base64.b64encode(image.png).decode("ascii")


def image_hash(image: Screenshot) -> str:
    return hashlib.sha256(image.png).hexdigest()


# -- responses ----------------------------------------------------------------------------


def usage(prompt: Sequence[int], generation: Generation) -> dict[str, int]:
    return {"prompt_tokens": len(prompt), "completion_tokens": len(generation.ids),
            "total_tokens": len(prompt) + len(generation.ids)}


def stop_reason(generation: Generation, request: Mapping[str, Any]) -> int | None:
    """vLLM's ``stop_reason``: the stop token id when a requested stop id ended the text, None for EOS/length."""
    requested = request.get("stop_token_ids") or []
    if generation.finish_reason == "stop" and generation.ids and generation.ids[-1] in requested:
        return generation.ids[-1]
    return None


def completion_body(model: str, body: Mapping[str, Any], prompt: list[int], gen: Generation,
                    renderer: ChatRenderer, want_logprobs: bool) -> dict[str, Any]:
    with_ids = bool(body.get("return_token_ids"))
    logprobs = None
    if want_logprobs:
        tokens = _token_strings(gen.ids, renderer, bool(body.get("return_tokens_as_token_ids")))
        offsets, at = [], 0
        for token in tokens:
            offsets.append(at)
            at += len(token)
        logprobs = {"tokens": tokens, "token_logprobs": gen.logprobs, "text_offset": offsets,
                    "top_logprobs": [{t: lp} for t, lp in zip(tokens, gen.logprobs)]}
    choice = {"index": 0, "text": gen.text, "logprobs": logprobs, "finish_reason": gen.finish_reason,
              "stop_reason": stop_reason(gen, body), "token_ids": gen.ids if with_ids else None,
              "prompt_token_ids": prompt if with_ids else None}
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
            "model": model, "choices": [choice], "usage": usage(prompt, gen)}


def chat_body(model: str, body: Mapping[str, Any], prompt: list[int], gen: Generation, renderer: ChatRenderer,
              want_logprobs: bool) -> dict[str, Any]:
    with_ids = bool(body.get("return_token_ids"))
    content = _logprob_content(gen, renderer, bool(body.get("return_tokens_as_token_ids"))) if want_logprobs \
        else None
    choice = {"index": 0, "message": {"role": "assistant", "content": gen.text},
              "logprobs": None if content is None else {"content": content}, "finish_reason": gen.finish_reason,
              "stop_reason": stop_reason(gen, body), "token_ids": gen.ids if with_ids else None}
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [choice], "usage": usage(prompt, gen),
            "prompt_token_ids": prompt if with_ids else None}


def generate_body(request_id: str, model: str, prompt: list[int], gen: Generation, renderer: ChatRenderer,
                  want_logprobs: bool) -> dict[str, Any]:
    content = _logprob_content(gen, renderer, True) if want_logprobs else None
    choice = {"index": 0, "logprobs": None if content is None else {"content": content},
              "finish_reason": gen.finish_reason, "token_ids": gen.ids}
    return {"request_id": request_id, "model": model, "choices": [choice], "usage": usage(prompt, gen),
            "prompt_logprobs": None, "kv_transfer_params": None}


def render_body(model: str, body: Mapping[str, Any], ids: list[int], images: list[Screenshot],
                runs: list[tuple[int, int]]) -> dict[str, Any]:
    """vLLM's render answer: a token-in ``GenerateRequest`` for ``/inference/v1/generate``."""
    features = None
    if images:
        features = {"mm_hashes": {"image": [image_hash(img) for img in images]},
                    "mm_placeholders": {"image": [{"offset": o, "length": n} for o, n in runs]},
                    "kwargs_data": {"image": [encode_image_item(img) for img in images]}}
    sampling = {k: body[k] for k in ("temperature", "top_p", "seed", "stop_token_ids", "logit_bias") if k in body}
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        sampling["max_tokens"] = max_tokens
    return {"request_id": str(body.get("request_id") or uuid.uuid4().hex), "model": model, "token_ids": ids,
            "features": features, "sampling_params": sampling, "stream": False}


def _logprob_content(gen: Generation, renderer: ChatRenderer, as_ids: bool) -> list[dict[str, Any]]:
    tokens = _token_strings(gen.ids, renderer, as_ids)
    return [{"token": t, "logprob": max(lp, -9999.0), "bytes": None, "top_logprobs": []}
            for t, lp in zip(tokens, gen.logprobs)]


def _token_strings(ids: Sequence[int], renderer: ChatRenderer, as_ids: bool) -> list[str]:
    return [f"token_id:{i}" if as_ids else renderer.decode([i]) for i in ids]


def _number(body: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise BadRequest(f"{where}{key} must be a number, got {value!r}", param=where + key)
    return float(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
