"""Visual Context Segmentation vs step-wise vs whole-trajectory training items.

``python bench/segmentation.py [--quick]`` prints one JSON object: for 50-turn
synthetic episodes with the paper's proportions (a 1280x800 screenshot per turn,
1000 visual tokens in Qwen3-VL; a few hundred response tokens per turn), per
segmenter and window K (Delta = K, the paper's sweep): training items per
episode, tokens and image tokens the trainer processes, the peak tokens of one
item, what the rollout engine is prompted with, and the segmentation time per
episode; then the invariant mismatches over random episodes (target 0).
Real parts: the tiny Qwen BPE tokenizer trained in-process and the Qwen3-VL
image processor settings.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import statistics
import sys
import time
from typing import Any

import structlog

from core.types import Observation, Screenshot
from plugins.qwen_vl.model import QwenVLModel, QwenVLOptions, TinyModelSettings
from segmenters.checks import (
    check_prompts_precede_responses,
    check_segment_shape,
    check_stream_matches_template,
    check_trained_once,
    expected_sliding_segments,
)
from segmenters.step_wise import StepWiseSegmenter
from segmenters.synthetic import WORDS, SampledResponse, SyntheticEpisode, SyntheticTurn, random_episode, run_episode
from segmenters.windowed import SlidingWindowOptions, SlidingWindowSegmenter, TrajectorySegmenter

log = structlog.get_logger("bench.segmentation")

WINDOWS = (1, 3, 5, 8, 10, 15)


def png_screenshot(width: int, height: int, shade: int) -> Screenshot:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (shade, 255 - shade, 128)).save(buffer, "PNG")
    return Screenshot(png=buffer.getvalue(), width=width, height=height)


def paper_episode(renderer: Any, rng: random.Random, turns: int, shots: list[Screenshot]) -> SyntheticEpisode:
    """``turns`` turns, each a 150-450-token response (reasoning + action) and a new full-size screenshot."""
    episode_turns = []
    for _ in range(turns):
        target = rng.randint(150, 450)
        words: list[str] = []
        ids: list[int] = []
        while len(ids) < target:
            words.append(rng.choice(WORDS))
            ids = renderer.encode_text(" ".join(words))
        ids = ids + [renderer.stop_ids[0]]
        response = SampledResponse(ids, [-rng.random() for _ in ids], renderer.decode(ids))
        observation = Observation(screenshot=rng.choice(shots), text="Action executed.")
        episode_turns.append(SyntheticTurn(response, observation))
    return SyntheticEpisode(
        "You are a computer-use agent. Actions: left_click(x, y), type(text), key(keys), scroll, done().",
        "Open the spreadsheet, sum column B into B12 and save the file as report.ods.",
        Observation(screenshot=shots[0]),
        episode_turns,
    )


def measure(name: str, make: Any, renderer: Any, episodes: list[SyntheticEpisode], window: int | None) -> dict:
    items, tokens, image_tokens, trainable, peak, prompt_tokens, prompt_images = [], [], [], [], [], [], []
    seconds, cpu_seconds = [], []
    for episode in episodes:
        run = run_episode(make(), renderer, episode)
        segs = run.segments
        items.append(len(segs))
        tokens.append(sum(s.num_tokens for s in segs))
        image_tokens.append(sum(renderer.image_tokens(i) for s in segs for i in s.images))
        trainable.append(sum(s.num_trainable for s in segs))
        peak.append(max(s.num_tokens for s in segs))
        seconds.append(run.seconds)
        cpu_seconds.append(run.cpu_seconds)
        prompt_tokens.extend(len(ids) for ids, _ in run.prompts)
        prompt_images.extend(len(images) for _, images in run.prompts)
    return {
        "segmenter": name,
        "keep_images": window,
        "min_removal": window,
        "items_per_episode": statistics.mean(items),
        "train_tokens_per_episode": statistics.mean(tokens),
        "train_image_tokens_per_episode": statistics.mean(image_tokens),
        "trainable_tokens_per_episode": statistics.mean(trainable),
        "peak_tokens_per_item": max(peak),
        "rollout_prompt_tokens_mean": statistics.mean(prompt_tokens),
        "rollout_prompt_tokens_peak": max(prompt_tokens),
        "rollout_prompt_images_peak": max(prompt_images),
        "segmentation_ms_per_episode": 1000 * statistics.mean(seconds),
        "segmentation_cpu_ms_per_episode": 1000 * statistics.mean(cpu_seconds),
    }


def invariant_mismatches(renderer: Any, count: int, seed: int) -> dict:
    """Run ``count`` random episodes through all three segmenters with every check; count failing episodes."""
    rng = random.Random(seed)
    shots = [png_screenshot(w, h, i * 40) for i, (w, h) in enumerate([(1280, 800), (640, 400), (320, 200), (256, 256)])]
    failing = {"sliding-window": 0, "step-wise": 0, "trajectory": 0}
    problems_seen: list[str] = []
    started = time.perf_counter()
    for index in range(count):
        turns, keep, removal = rng.randint(1, 60), rng.randint(1, 15), rng.randint(1, 15)
        all_images = rng.random() < 0.7
        episode = random_episode(
            renderer,
            random.Random(rng.getrandbits(64)),
            turns=turns,
            screenshots=shots,
            screenshot_rate=1.0 if all_images else 0.8,
            max_response_words=rng.choice([5, 40, 120]),
            final_observation=rng.random() < 0.5,
        )
        ids = {"trajectory_id": f"traj-{index}", "task_id": f"task-{index % 7}"}
        runs = {
            "sliding-window": (
                SlidingWindowSegmenter(SlidingWindowOptions(keep_images=keep, min_removal=removal)),
                keep + removal,
            ),
            "step-wise": (StepWiseSegmenter(), 1),
            "trajectory": (TrajectorySegmenter(), None),
        }
        for name, (segmenter, max_images) in runs.items():
            stream_check = check_stream_matches_template if name != "step-wise" else None
            run = run_episode(segmenter, renderer, episode, after_observation=stream_check, **ids)
            problems = list(run.problems)
            problems += check_trained_once(run.segments, episode.responses)
            problems += check_prompts_precede_responses(run.segments, run.prompts, episode.responses)
            problems += check_segment_shape(run.segments, renderer, max_images=max_images, **ids)
            if name == "sliding-window" and all_images:
                expected = expected_sliding_segments(turns, episode.observations, keep, removal)
                if len(run.segments) != expected:
                    problems.append(f"{len(run.segments)} segments, expected {expected}")
            if name == "step-wise" and len(run.segments) != turns:
                problems.append(f"{len(run.segments)} step-wise items for {turns} turns")
            if name == "trajectory" and len(run.segments) != 1:
                problems.append(f"{len(run.segments)} trajectory items")
            if problems:
                failing[name] += 1
                problems_seen.extend(f"episode {index} {name}: {p}" for p in problems[:3])
        if (index + 1) % 100 == 0:
            log.info("invariant episodes checked", done=index + 1, of=count)
    return {
        "episodes": count,
        "turns_range": [1, 60],
        "keep_images_range": [1, 15],
        "min_removal_range": [1, 15],
        "mismatched_episodes": failing,
        "mismatches_total": sum(failing.values()),
        "first_problems": problems_seen[:10],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few episodes (a smoke run in well under a minute)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))

    episodes_per_setting = 1 if args.quick else 4
    random_episodes = 40 if args.quick else 1000
    turns = 50
    model = QwenVLModel(QwenVLOptions(tiny=TinyModelSettings(family="qwen3_vl")))
    renderer = model.renderer()
    shots = [png_screenshot(1280, 800, shade) for shade in (10, 90, 170, 250)]
    assert renderer.image_tokens(shots[0]) == 1000
    rng = random.Random(args.seed)
    episodes = [paper_episode(renderer, rng, turns, shots) for _ in range(episodes_per_setting)]

    results = [measure("step-wise", StepWiseSegmenter, renderer, episodes, None)]
    log.info("measured", segmenter="step-wise")
    results.append(measure("trajectory", TrajectorySegmenter, renderer, episodes, None))
    log.info("measured", segmenter="trajectory")
    for k in WINDOWS:
        make = lambda k=k: SlidingWindowSegmenter(SlidingWindowOptions(keep_images=k, min_removal=k))  # noqa: E731
        results.append(measure("sliding-window", make, renderer, episodes, k))
        log.info("measured", segmenter="sliding-window", keep_images=k)

    step, whole = results[0], results[1]
    for row in results:
        row["items_vs_step_wise"] = round(row["items_per_episode"] / step["items_per_episode"], 3)
        row["train_tokens_vs_step_wise"] = round(row["train_tokens_per_episode"] / step["train_tokens_per_episode"], 3)
        row["rollout_prompt_tokens_vs_trajectory"] = round(
            row["rollout_prompt_tokens_mean"] / whole["rollout_prompt_tokens_mean"], 3
        )
        for key in ("train_tokens_per_episode", "train_image_tokens_per_episode", "trainable_tokens_per_episode",
                    "rollout_prompt_tokens_mean", "segmentation_ms_per_episode", "segmentation_cpu_ms_per_episode",
                    "items_per_episode"):
            row[key] = round(row[key], 2)

    report = {
        "benchmark": "segmentation",
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "settings": {
            "quick": args.quick,
            "seed": args.seed,
            "turns_per_episode": turns,
            "episodes_per_setting": episodes_per_setting,
            "screenshot": [1280, 800],
            "visual_tokens_per_screenshot": renderer.image_tokens(shots[0]),
            "response_tokens_per_turn": [150, 450],
            "tokenizer": f"tiny Qwen-style byte-level BPE, vocab {len(renderer.tokenizer)}",
            "image_processor": "Qwen3-VL defaults (patch 16, merge 2)",
            "sliding_window_delta": "equal to K (the paper's sweep)",
        },
        "results": results,
        "invariants": invariant_mismatches(renderer, random_episodes, args.seed + 1),
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
