"""GPU checks of the scale plugins (run by ``bench/gpu_check.sh`` under torchrun, one rank); ONE JSON object on stdout.

Each check is independent and reports ``status`` ok/failed/skipped with its
reason. Settings and the machine are in the JSON; ratios compare megatron to
torch side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: bf16 dense peak of an H200 / H100 SXM (vendor figure); MFU = model FLOP/s over this
DEFAULT_PEAK_TFLOPS = 989.0


def log(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    import torch
    import transformers

    info: dict[str, Any] = {"torch": torch.__version__, "transformers": transformers.__version__,
                            "cuda": torch.version.cuda, "gpu": None}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    for name in ("megatron.core", "megatron.bridge", "vllm"):
        try:
            module = __import__(name, fromlist=["__version__"])
            info[name] = getattr(module, "__version__", "installed")
        except Exception as exc:  # report, never stop: the checks say what they could not do
            info[name] = f"unavailable: {type(exc).__name__}: {exc}"[:300]
    return info


def model_flops_per_token(policy: Any) -> float:
    """Training FLOPs per token of the trainable language model: 6 N (+ reference forward 2 N)."""
    from trainers.megatron.names import expected_parameters

    n = sum(_numel(s) for name, s in expected_parameters(policy).items() if not name.startswith("model.visual."))
    return 8.0 * n


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def timed_steps(trainer: Any, segments: list[Any], steps: int) -> tuple[list[dict[str, float]], float]:
    import torch

    metrics = []
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(steps):
        metrics.append(trainer.train_step(segments))
    torch.cuda.synchronize()
    return metrics, time.perf_counter() - started


def check(name: str, results: dict[str, Any], fn: Callable[[], dict[str, Any]]) -> None:
    started = time.perf_counter()
    try:
        out = fn()
        results[name] = {"status": out.pop("status", "ok"), **out}
    except Exception as exc:
        results[name] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:2000],
                         "traceback": traceback.format_exc()[-3000:]}
    results[name]["seconds"] = round(time.perf_counter() - started, 2)
    log(f"[gpu_check] {name}: {results[name]['status']} ({results[name]['seconds']} s)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer steps and requests")
    parser.add_argument("--peak-tflops", type=float, default=DEFAULT_PEAK_TFLOPS)
    args = parser.parse_args()

    import torch

    from core.config import AlgorithmSection
    from tests.scale import batch
    from trainers.torch_backend import TorchTrainer, TorchTrainerOptions

    steps = 2 if args.quick else 4
    settings = {"quick": args.quick, "steps": steps, "peak_tflops": args.peak_tflops, "model": batch.TINY,
                "tensor_parallel_size": 1, "algorithm": {"kl_coef": 0.01, "lr": 1e-3}}
    results: dict[str, Any] = {"bench": "gpu_check", "settings": settings, "machine": machine()}
    if not torch.cuda.is_available():
        results["error"] = "no CUDA GPU visible"
        print(json.dumps(results))
        return
    algorithm = AlgorithmSection(kl_coef=0.01)
    policy = batch.policy_model()
    segments = batch.segments(policy.renderer())
    flops_per_token = model_flops_per_token(policy)
    shared: dict[str, Any] = {}

    def rate(metrics: list[dict[str, float]], seconds: float) -> dict[str, float]:
        tokens = sum(m.get("batch/tokens", 0.0) for m in metrics)
        tps = tokens / seconds
        return {"tokens_per_s": round(tps, 1), "mfu": tps * flops_per_token / (args.peak_tflops * 1e12)}

    def torch_backend() -> dict[str, Any]:
        torch.manual_seed(0)
        trainer = TorchTrainer(TorchTrainerOptions(device="cuda", lr=1e-3), model=policy, algorithm=algorithm)
        shared["torch_proximal"] = trainer.recompute_logprobs(segments)  # the initial weights' (old_logprobs: recompute)
        metrics, seconds = timed_steps(trainer, segments, steps)
        shared["torch_losses"] = [m["loss/pg"] for m in metrics]
        shared["torch_weights"] = {n: t.detach().float().cpu() for b in trainer.export_weights() for n, t in b}
        bf16 = TorchTrainer(TorchTrainerOptions(device="cuda", lr=1e-3, dtype="bfloat16"), model=policy,
                            algorithm=algorithm)
        timed_steps(bf16, segments, 1)  # warm-up
        bf16_metrics, bf16_seconds = timed_steps(bf16, segments, steps)
        trainer.close()
        bf16.close()
        return {"losses": shared["torch_losses"], "fp32": rate(metrics, seconds), "bf16": rate(bf16_metrics, bf16_seconds)}

    def fsdp_backend() -> dict[str, Any]:
        from trainers.fsdp import FSDPTrainer, FSDPTrainerOptions

        torch.manual_seed(0)
        trainer = FSDPTrainer(FSDPTrainerOptions(lr=1e-3), model=policy, algorithm=algorithm)  # nccl, 1 rank
        metrics, seconds = timed_steps(trainer, segments, steps)
        losses = [m["loss/pg"] for m in metrics]
        out: dict[str, Any] = {"losses": losses, "fp32": rate(metrics, seconds)}
        if "torch_losses" in shared:
            out["loss_rel_diff_max"] = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(losses, shared["torch_losses"]))
            out["status"] = "ok" if out["loss_rel_diff_max"] < 1e-4 else "mismatch"
        trainer.close()
        return out

    def megatron_backend() -> dict[str, Any]:
        from trainers.megatron.backend import MegatronTrainer, MegatronTrainerOptions

        torch.manual_seed(0)
        trainer = MegatronTrainer(MegatronTrainerOptions(lr=1e-3, dtype="float32"), model=policy, algorithm=algorithm)
        proximal = trainer.recompute_logprobs(segments)
        metrics, seconds = timed_steps(trainer, segments, steps)
        losses = [m["loss/pg"] for m in metrics]
        out: dict[str, Any] = {"losses": losses, "fp32": rate(metrics, seconds)}
        if "torch_proximal" in shared:
            out["recompute_max_abs_diff_vs_torch"] = max(abs(a - b) for mine, theirs in
                                                         zip(proximal, shared["torch_proximal"])
                                                         for a, b in zip(mine, theirs))
        exported = {n: t.detach().float().cpu() for b in trainer.export_weights() for n, t in b}
        if "torch_losses" in shared:
            diffs = [abs(a - b) / max(abs(b), 1e-6) for a, b in zip(losses, shared["torch_losses"])]
            out["loss_rel_diff_max"] = max(diffs)
            weights = shared["torch_weights"]
            out["weights_max_abs_diff"] = max(float((exported[n] - weights[n]).abs().max()) for n in weights)
            out["exported_names_match"] = set(exported) == set(weights)
            out["loss_tolerance"] = 2e-3
            out["status"] = "ok" if out["exported_names_match"] and out["loss_rel_diff_max"] < 2e-3 else "mismatch"
        bf16 = MegatronTrainer(MegatronTrainerOptions(lr=1e-3, dtype="bfloat16"), model=policy, algorithm=algorithm)
        timed_steps(bf16, segments, 1)
        bf16_metrics, bf16_seconds = timed_steps(bf16, segments, steps)
        out["bf16"] = rate(bf16_metrics, bf16_seconds)
        if "torch" in results and results["torch"].get("status") == "ok":
            out["bf16_tokens_per_s_vs_torch"] = round(out["bf16"]["tokens_per_s"]
                                                      / results["torch"]["bf16"]["tokens_per_s"], 3)
        return out

    def vllm_engine() -> dict[str, Any]:
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            return {"status": "skipped", "reason": f"vLLM not installed ({exc})"}
        import asyncio

        from core.interfaces import GenerationRequest
        from plugins.rollout.vllm_engine import VLLMEngineOptions, VLLMRolloutEngine

        engine = VLLMRolloutEngine(VLLMEngineOptions(gpu_memory_utilization=0.3, dtype="float32",
                                                     enforce_eager=True), model=policy, seed=0)
        trainer = TorchTrainer(TorchTrainerOptions(device="cuda", lr=1e-3), model=policy, algorithm=algorithm)
        renderer = policy.renderer()
        n = 4 if args.quick else 16

        async def sample() -> list[Any]:
            reqs = [GenerationRequest(s.input_ids[: s.loss_mask.index(1)], list(s.images), 24,
                                      temperature=algorithm.temperature, stop_ids=renderer.stop_ids, seed=i)
                    for i, s in enumerate(segments * (n // len(segments) + 1))][:n]
            return await asyncio.gather(*(engine.generate(r) for r in reqs)), reqs

        def logprob_gap(gens: list[Any], reqs: list[Any]) -> float:
            import dataclasses

            worst = 0.0
            for gen, req in zip(gens, reqs):
                seg = dataclasses.replace(segments[0], input_ids=req.prompt_ids + gen.ids, images=req.images,
                                          loss_mask=[0] * len(req.prompt_ids) + [1] * len(gen.ids),
                                          rollout_logprobs=[0.0] * (len(req.prompt_ids) + len(gen.ids)))
                recomputed = trainer.recompute_logprobs([seg])[0][len(req.prompt_ids):]
                worst = max(worst, max(abs(a - b) for a, b in zip(recomputed, gen.logprobs)))
            return worst

        started = time.perf_counter()
        gens, reqs = asyncio.run(sample())
        gen_seconds = time.perf_counter() - started
        before = logprob_gap(gens, reqs)
        trainer.train_step(segments)  # the policy moves ...
        sync_started = time.perf_counter()
        for bucket in trainer.export_weights(1 << 20):
            engine.update_weights(bucket)  # ... and reaches vLLM over CUDA IPC
        sync_seconds = time.perf_counter() - sync_started
        gens2, reqs2 = asyncio.run(sample())
        after = logprob_gap(gens2, reqs2)
        asyncio.run(engine.close())
        tokens = sum(len(g.ids) for g in gens)
        return {"requests": n, "generated_tokens": tokens, "tokens_per_s": round(tokens / gen_seconds, 1),
                "logprob_max_abs_diff_before_update": before, "logprob_max_abs_diff_after_update": after,
                "weight_sync_s": round(sync_seconds, 3), "weight_version": engine.weight_version,
                "status": "ok" if max(before, after) < 1e-2 and engine.weight_version == 1 else "mismatch"}

    check("torch", results, torch_backend)
    check("torch_fsdp", results, fsdp_backend)
    check("megatron", results, megatron_backend)
    check("vllm", results, vllm_engine)
    print(json.dumps(results, default=str))


if __name__ == "__main__":
    main()
