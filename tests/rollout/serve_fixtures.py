"""Shared by the ``plugins.serving`` and ``openai-compatible`` tests: a tiny Qwen3-VL policy and real servers on loopback.

The tiny model's tokenizer is trained in-process once per test process
(:func:`tiny_policy`); every server is a real :class:`plugins.serving.server.EngineServer`
bound to 127.0.0.1 with an in-process ``hf`` engine of its own.
"""

from __future__ import annotations

import functools
import io
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from core.interfaces import Message
from core.pluginmanager import Plugins, load_plugins
from plugins.serving.server import EngineServer
from core.types import Screenshot


@functools.cache
def tiny_policy() -> tuple[Plugins, Any]:
    plugins = load_plugins(environ={})
    model = plugins.registry("model").create("qwen-vl", {"tiny": {"family": "qwen3_vl"}, "seed": 3})
    model.renderer()  # trains the tokenizer now, once
    return plugins, model


def hf_engine() -> Any:
    plugins, model = tiny_policy()
    return plugins.registry("rollout_engine").create("hf", {}, model=model, seed=0)


def remote_engine(url: str, **options: Any) -> Any:
    plugins, model = tiny_policy()
    return plugins.registry("rollout_engine").create("openai-compatible", {"base_url": url, **options},
                                                      model=model, seed=0)


@contextmanager
def serving(host: str = "127.0.0.1", **server_options: Any) -> Iterator[tuple[EngineServer, str]]:
    """A fresh server (its own engine and weights) on a free port of ``host`` (default: loopback)."""
    _, model = tiny_policy()
    server = EngineServer(hf_engine(), model, served_model_name="tiny", **server_options)
    url = server.start(host, 0)
    try:
        yield server, url
    finally:
        server.stop()


def record(server: EngineServer, method: str, path: str) -> list[Any]:
    """Bodies of the requests the server answers on ``path`` from now on."""
    seen: list[Any] = []
    route: Callable[[Any, Any], Any] = server.routes.table[(method, path)]

    def recording(body: Any, query: Any) -> Any:
        seen.append(body)
        return route(body, query)

    server.routes.table[(method, path)] = recording
    return seen


def screenshot(color: str, size: tuple[int, int] = (128, 96)) -> Screenshot:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return Screenshot.from_png(buffer.getvalue())


def text_prompt(text: str = "Open the settings menu.") -> list[int]:
    _, model = tiny_policy()
    messages = [Message("system", ["You are a computer-use agent."]), Message("user", [text])]
    return list(model.renderer().render(messages, add_generation_prompt=True).ids)


def image_prompt(images: list[Screenshot]) -> list[int]:
    _, model = tiny_policy()
    content: list[Any] = ["Task: click the blue button."]
    for i, img in enumerate(images):
        content += [f" Step {i}:", img]
    messages = [Message("system", ["You are a computer-use agent."]), Message("user", content)]
    return list(model.renderer().render(messages, add_generation_prompt=True).ids)
