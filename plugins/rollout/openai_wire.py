"""Wire helpers of the ``openai-compatible`` engine: errors, response parsing, images, keys."""

from __future__ import annotations

import base64
import os
from typing import Any

from core.errors import ScaleCUAError
from core.types import Screenshot


class RemoteEngineError(ScaleCUAError):
    """The server refused or failed a request; the message holds its reason."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class PromptMismatchError(RemoteEngineError):
    """The server's prompt token ids differ from the segmenter's: the rollout would train on a different context."""


def passthrough_template(pad_text: str) -> str:
    """A chat template that emits text parts verbatim and ``pad_text`` for each image part."""
    pad = pad_text.replace("'", "\\'")
    return (
        "{%- for message in messages -%}{%- if message['content'] is string -%}{{ message['content'] }}"
        "{%- else -%}{%- for part in message['content'] -%}{%- if part['type'] == 'text' -%}{{ part['text'] }}"
        "{%- else -%}" + pad + "{%- endif -%}{%- endfor -%}{%- endif -%}{%- endfor -%}"
    )


def image_features(data: dict[str, Any], count: int) -> list[dict[str, Any]]:
    features = data.get("features") or {}
    try:
        hashes = features["mm_hashes"]["image"]
        places = features["mm_placeholders"]["image"]
        kwargs = (features.get("kwargs_data") or {}).get("image")
    except (KeyError, TypeError):
        raise RemoteEngineError("/v1/chat/completions/render returned no image features: the server does not "
                                "offer vLLM's render API (vLLM >= 0.20, --enable-scale-out on newer releases); "
                                "use prompt_api 'chat'") from None
    if kwargs is None or not (len(hashes) == len(places) == len(kwargs) == count) or None in kwargs:
        raise RemoteEngineError(f"/v1/chat/completions/render returned features for {len(places)} images with "
                                f"{'no' if kwargs is None else len(kwargs)} data items; expected {count} of each")
    return [{"hash": h, "length": int(p["length"]), "kwargs": k} for h, p, k in zip(hashes, places, kwargs)]


def first_choice(data: dict[str, Any], endpoint: str) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise RemoteEngineError(f"{endpoint} returned no choices: {str(data)[:300]}")
    return choices[0]


def data_url(image: Screenshot) -> str:
    return "data:image/png;base64," + base64.b64encode(image.png).decode("ascii")


def json_object(response: Any, url: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        raise RemoteEngineError(f"{url} answered {response.status_code} with non-JSON: {response.text[:300]!r}") \
            from None
    if not isinstance(data, dict):
        raise RemoteEngineError(f"{url} answered a JSON {type(data).__name__}, expected an object")
    return data


def error_reason(response: Any) -> str:
    """The error message of an OpenAI/vLLM/FastAPI error body, else the raw text."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        for key in ("message", "detail", "error"):
            if data.get(key):
                return str(data[key])
    return str(data)[:500]


def api_key_from_env(env: str | None) -> str | None:
    if env is None:
        return None
    value = os.environ.get(env)
    if not value:
        raise ScaleCUAError(f"rollout.options.api_key_env: environment variable {env} is not set; export the "
                            "server's API key there, or remove api_key_env")
    return value
