"""Benchmark of remote rollouts: the ``openai-compatible`` engine through ``plugins.serving`` vs the in-process ``hf`` engine.

``python bench/remote_rollout.py [--quick]`` prints one JSON object on stdout (logs go to stderr):

* ``generation``: tokens/s and p50 request latency of the in-process engine and of the remote engine
  (text prompts over ``/v1/completions``, image prompts over vLLM's render + ``/inference/v1/generate``),
  sequentially and with 8 concurrent requests; ``ratios`` holds remote/in-process throughput (1.0: HTTP is free).
* ``weight_sync``: seconds to push the language-model weights (vLLM's weight-transfer protocol over HTTP +
  Gloo) with the default options (256 MiB per update call, 4 MiB packed broadcasts), one packed buffer per
  call, 1 MiB calls, and one broadcast per tensor, against an in-place in-process update; ``ratios`` compares
  each to the default.

The model is a random Qwen3-VL built from a config: the tiny test size with ``--quick``, a ~10 M-parameter
one otherwise (so weight transfer moves ~40 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

import torch

from core.runtime import logs
from core.interfaces import GenerationRequest, Message
from core.pluginmanager import load_plugins
from plugins.serving.server import EngineServer
from core.types import Screenshot


def screenshot(seed: int, size: tuple[int, int]) -> Screenshot:
    from PIL import Image

    generator = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 255, (size[1], size[0], 3), generator=generator, dtype=torch.uint8).numpy()
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return Screenshot.from_png(buffer.getvalue())


def prompts(renderer: Any, with_images: bool, count: int, tokens: int) -> list[GenerationRequest]:
    out = []
    for i in range(count):
        content: list[Any] = [f"Task {i}: open the file menu and save the document."]
        images = [screenshot(10 * i + j, (320, 192)) for j in range(2)] if with_images else []
        for j, img in enumerate(images):
            content += [f" Screen {j}:", img]
        rendered = renderer.render([Message("system", ["You are a computer-use agent."]), Message("user", content)],
                                   add_generation_prompt=True)
        out.append(GenerationRequest(prompt_ids=rendered.ids, images=rendered.images, max_new_tokens=tokens,
                                     temperature=0.8, stop_ids=(), seed=i))
    return out


async def timed(engine: Any, requests: list[GenerationRequest], concurrency: int) -> dict[str, float]:
    latencies: list[float] = []
    generated = 0
    semaphore = asyncio.Semaphore(concurrency)

    async def one(request: GenerationRequest) -> None:
        nonlocal generated
        async with semaphore:
            started = time.perf_counter()
            result = await engine.generate(request)
            latencies.append(time.perf_counter() - started)
            generated += len(result.ids)

    started = time.perf_counter()
    await asyncio.gather(*[one(r) for r in requests])
    wall = time.perf_counter() - started
    return {"tokens_per_s": round(generated / wall, 1), "p50_latency_ms": round(statistics.median(latencies) * 1e3, 1),
            "requests": len(requests), "wall_s": round(wall, 3)}


def bench_generation(plugins: Any, model: Any, url: str, quick: bool) -> dict[str, Any]:
    renderer = model.renderer()
    direct = plugins.registry("rollout_engine").create("hf", {}, model=model, seed=0)
    results: dict[str, Any] = {}
    count, tokens = (4, 8) if quick else (16, 32)
    for kind, with_images in (("text", False), ("images", True)):
        requests = prompts(renderer, with_images, count, tokens)
        for concurrency in (1, 8):
            remote = plugins.registry("rollout_engine").create("openai-compatible", {"base_url": url},
                                                                model=model, seed=0)

            async def both() -> tuple[dict[str, float], dict[str, float]]:
                await direct.generate(requests[0])  # warm-up
                await remote.generate(requests[0])
                a = await timed(direct, requests, concurrency)
                b = await timed(remote, requests, concurrency)
                await remote.close()
                return a, b

            in_process, over_http = asyncio.run(both())
            results[f"{kind}_c{concurrency}"] = {
                "in_process": in_process, "remote": over_http,
                "ratio_remote_over_in_process": round(over_http["tokens_per_s"] / in_process["tokens_per_s"], 3),
            }
    return results


def _push(engine: Any, weights: list[tuple[str, Any]], version: int) -> None:
    """One weight-sync session (the engines' contract): begin, the buckets, commit."""
    engine.begin_weight_update(version)
    engine.update_weights(weights)
    engine.commit_weight_update()


def bench_weight_sync(plugins: Any, model: Any, url: str, quick: bool) -> dict[str, Any]:
    direct = plugins.registry("rollout_engine").create("hf", {}, model=model, seed=0)
    weights = [(n, p.detach().clone()) for n, p in direct.model.named_parameters()
               if not n.startswith("model.visual.")]
    total_mb = sum(t.numel() * t.element_size() for _, t in weights) / 2**20
    repeats = 2 if quick else 3
    variants = {  # name -> weight_transfer options
        "default": {},  # 256 MiB per /update_weights call, packed 4 MiB broadcasts
        "one_buffer_per_call": {"bucket_bytes": 64 << 20, "packed_buffer_bytes": 64 << 20},
        "small_calls_1MiB": {"bucket_bytes": 1 << 20},
        "per_tensor": {"packed": False},
    }
    out: dict[str, Any] = {"tensors": len(weights), "megabytes": round(total_mb, 2)}
    started = time.perf_counter()
    for version in range(1, repeats + 1):
        _push(direct, weights, version)
    out["in_process_s"] = round((time.perf_counter() - started) / repeats, 4)
    for name, options in variants.items():
        remote = plugins.registry("rollout_engine").create(
            "openai-compatible", {"base_url": url, "weight_transfer": options}, model=model, seed=0)
        # the server's version only increases: each variant continues where the last one stopped
        base_version = 1000 * (list(variants).index(name) + 1)
        _push(remote, weights[:1], base_version)  # rendezvous outside the timing
        started = time.perf_counter()
        for step in range(1, repeats + 1):
            _push(remote, weights, base_version + step)
        seconds = (time.perf_counter() - started) / repeats
        out[name] = {"options": options, "seconds": round(seconds, 4), "mb_per_s": round(total_mb / seconds, 1)}
        asyncio.run(remote.close())
    base = out["default"]["seconds"]
    out["ratios_over_default"] = {name: round(out[name]["seconds"] / base, 3) for name in variants}
    out["ratio_default_over_in_process"] = round(base / max(out["in_process_s"], 1e-9), 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, few requests")
    args = parser.parse_args()
    logs.configure("warning")
    torch.set_num_threads(max(1, (os.cpu_count() or 2)))
    tiny: dict[str, Any] = {"family": "qwen3_vl"}
    if not args.quick:
        tiny.update(hidden_size=512, num_layers=4, num_heads=8, num_kv_heads=4, head_dim=64, intermediate_size=1024)
    # only what this bench needs (bench/samplers.py would shadow the samplers package on sys.path)
    plugins = load_plugins(only=["models", "rollout"])
    model = plugins.registry("model").create("qwen-vl", {"tiny": tiny, "seed": 1})
    server = EngineServer(plugins.registry("rollout_engine").create("hf", {}, model=model, seed=0), model,
                          served_model_name="bench")
    url = server.start("127.0.0.1", 0)
    try:
        generation = bench_generation(plugins, model, url, args.quick)
        weight_sync = bench_weight_sync(plugins, model, url, args.quick)
    finally:
        server.stop()
    report = {
        "bench": "remote_rollout",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
                    "platform": platform.platform(), "torch_threads": torch.get_num_threads()},
        "settings": {"quick": args.quick, "model": tiny, "server": "plugins.serving (ThreadingHTTPServer, hf engine)",
                     "transport": "HTTP/1.1 JSON on loopback; weights over Gloo"},
        "generation": generation,
        "weight_sync": weight_sync,
    }
    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
