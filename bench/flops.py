"""A compute model of one GRPO training step: FLOPs at the shapes of a real model, from measured counts.

Not a measurement. Given the items a segmenter produced (token count, visual tokens per screenshot,
trainable positions) it counts the floating-point operations a training step spends at the shapes of
Qwen3-VL-8B-Instruct (its ``config.json``; the language model is Qwen3-8B), the paper's model class:

* language model, per item of L tokens: ``2 * P * L`` for the matrix multiplies (P: parameters per token,
  attention + SwiGLU MLP over all layers), ``2 * L^2 * H_q * d_head`` per layer for causal attention (QK^T
  and AV, half the square), and the LM head only at the trainable positions (as the trainers compute it);
* actor forward + backward = 3 forward passes, the frozen reference 1 (the KL term);
* vision tower (frozen, forward only), per screenshot encoding of p = 4 v patches for v visual tokens:
  ``2 * P_vit * p + 4 * p^2 * h`` per layer (full attention within the image), plus the patch merger;
  encoded once per distinct screenshot with the step's vision cache, once per segment holding it without.

Assumptions stated in :data:`ASSUMPTIONS`; the counts fed in are the benchmark's measured ones.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence


@dataclass(frozen=True)
class Shape:
    name: str
    hidden: int
    layers: int
    intermediate: int
    q_heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    vit_depth: int
    vit_hidden: int
    vit_intermediate: int
    vit_out: int
    merge: int

    @property
    def lm_params_per_token(self) -> int:
        attn = self.hidden * self.head_dim * (2 * self.q_heads + 2 * self.kv_heads)  # q, o, k, v
        mlp = 3 * self.hidden * self.intermediate  # gate, up, down
        return self.layers * (attn + mlp)

    @property
    def vit_params_per_patch(self) -> int:
        return self.vit_depth * (4 * self.vit_hidden**2 + 2 * self.vit_hidden * self.vit_intermediate)


#: Qwen3-VL-8B-Instruct: text Qwen3-8B (4096 wide, 36 layers, SwiGLU 12288, 32 query / 8 KV heads of 128),
#: vision tower 27 layers of 1152 (MLP 4304), 2x2 patch merge into the 4096-wide LM
QWEN3_VL_8B = Shape("Qwen3-VL-8B-Instruct", 4096, 36, 12288, 32, 8, 128, 151936, 27, 1152, 4304, 4096, 2)

ASSUMPTIONS = [
    "dense matrix-multiply FLOPs only (norms, activations, RoPE and softmax ignored)",
    "backward = 2x forward; no activation recomputation",
    "causal attention costs half the full square; vision attention is full within each screenshot",
    "the LM head runs only at trainable positions (as trainers/torch_backend.py computes logprobs)",
    "reference forward on every item (KL to the reference on, as in the paper)",
]


def lm_forward(shape: Shape, tokens: int, head_positions: int) -> float:
    attention = shape.layers * 2.0 * tokens * tokens * shape.q_heads * shape.head_dim
    return 2.0 * shape.lm_params_per_token * tokens + attention + 2.0 * shape.hidden * shape.vocab * head_positions


def vit_forward(shape: Shape, visual_tokens: int) -> float:
    patches = visual_tokens * shape.merge**2
    attention = shape.vit_depth * 4.0 * patches * patches * shape.vit_hidden
    merged = shape.vit_hidden * shape.merge**2
    merger = 2.0 * visual_tokens * (merged * merged + merged * shape.vit_out)
    return 2.0 * shape.vit_params_per_patch * patches + attention + merger


@dataclass(frozen=True)
class Item:
    """What the compute model needs of one segment: tokens, trainable positions, its screenshots' sizes."""

    tokens: int
    trainable: int
    images: tuple[tuple[bytes, int], ...]  # (screenshot key, visual tokens) per screenshot


def step_flops(items: Sequence[Item], shape: Shape = QWEN3_VL_8B, *, vision_cache: bool) -> dict[str, float]:
    """FLOPs of one training step over ``items``, split into actor, reference and vision tower."""
    actor = sum(3.0 * lm_forward(shape, i.tokens, i.trainable) for i in items)
    reference = sum(lm_forward(shape, i.tokens, i.trainable) for i in items)
    occurrences = [img for i in items for img in i.images]
    encoded: Iterable[tuple[bytes, int]] = dict(occurrences).items() if vision_cache else occurrences
    vision = sum(vit_forward(shape, tokens) for _, tokens in encoded)
    return {"actor": actor, "reference": reference, "vision": vision, "total": actor + reference + vision}


def describe(shape: Shape = QWEN3_VL_8B) -> dict[str, Any]:
    return {**asdict(shape), "lm_params_per_token": shape.lm_params_per_token,
            "vit_params_per_patch": shape.vit_params_per_patch, "assumptions": ASSUMPTIONS,
            "note": "a compute model, not a measurement"}


def main(argv: list[str] | None = None) -> int:
    """``python bench/flops.py [--quick] [--tokens N] [--visual-tokens V]``: the compute model's per-item FLOPs as
    one JSON object (instant either way; ``bench/vcs_speedup.py --model-only`` applies it to real segments)."""
    import argparse
    import json

    p = argparse.ArgumentParser(description="FLOPs of one item at Qwen3-VL-8B's shapes (a model, not a measurement)")
    p.add_argument("--quick", action="store_true", help="the same numbers (nothing here takes long)")
    p.add_argument("--tokens", type=int, nargs="*", default=[4096, 16384, 40000], help="item lengths")
    p.add_argument("--visual-tokens", type=int, default=1000, help="visual tokens per screenshot (1280x800: 1000)")
    args = p.parse_args(argv)
    shape = QWEN3_VL_8B
    items = {str(n): {"lm_forward_tflop": round(lm_forward(shape, n, n // 10) / 1e12, 2),
                      "actor_plus_reference_tflop": round(4 * lm_forward(shape, n, n // 10) / 1e12, 2)}
             for n in args.tokens}
    from core.commands.recipe_report import machine

    print(json.dumps({"benchmark": "flops", "quick": args.quick, "machine": machine(),
                      "settings": {"tokens": list(args.tokens), "visual_tokens": args.visual_tokens,
                                   "note": "an analytic count: no model runs"},
                      "model": describe(shape),
                      "items (10 % trainable positions)": items,
                      "vision_tflop_per_screenshot": round(vit_forward(shape, args.visual_tokens) / 1e12, 2)},
                     indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
