"""Hugging Face names of exported weights: Megatron-Bridge's checkpoint names -> transformers 5 parameter names.

Megatron-Bridge exports Qwen-VL weights under the checkpoint names of the
original releases (``model.layers.*``, ``visual.*``); transformers 5 models (the
``torch`` backend, the ``hf`` engine) name them ``model.language_model.layers.*``
and ``model.visual.*``. vLLM loads either. The rollout engines receive the
language model only (the vision tower is frozen), every name checked against
the model's own parameters.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping, Sequence

#: (checkpoint prefix, transformers 5 prefix); first match wins
_PREFIXES = (
    ("model.language_model.", "model.language_model."),
    ("model.visual.", "model.visual."),
    ("model.layers.", "model.language_model.layers."),
    ("model.embed_tokens.", "model.language_model.embed_tokens."),
    ("model.norm.", "model.language_model.norm."),
    ("visual.", "model.visual."),
    ("lm_head.", "lm_head."),
)


def to_transformers_name(name: str) -> str:
    for old, new in _PREFIXES:
        if name.startswith(old):
            return new + name[len(old):]
    raise ValueError(f"exported weight {name!r} has no known Qwen-VL prefix ({', '.join(p for p, _ in _PREFIXES)})")


def expected_parameters(policy: Any) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every parameter of the policy's transformers model (built on the meta device: no memory)."""
    import torch
    from transformers import AutoModelForImageTextToText

    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(policy.hf_config())
    return {name: tuple(p.shape) for name, p in model.named_parameters()}


def language_model_weights(
    exported: Iterable[tuple[str, Any]], expected: Mapping[str, tuple[int, ...]], vision_prefixes: Sequence[str]
) -> Iterator[tuple[str, Any]]:
    """The language-model weights of an export stream, renamed, each checked against the model's own parameters.

    A name the model does not have is an error, except the output layer of a model
    with tied embeddings (the bridge may export it; the model shares the tensor).
    """
    seen = set()
    for raw_name, tensor in exported:
        name = to_transformers_name(raw_name)
        if name.startswith(tuple(vision_prefixes)):
            continue
        if name not in expected:
            if name == "lm_head.weight":
                continue  # tied to the input embeddings
            raise KeyError(f"exported weight {raw_name!r} (as {name!r}) is not a parameter of the model; the "
                           "Megatron model and the Hugging Face config disagree")
        if tuple(tensor.shape) != tuple(expected[name]):
            raise ValueError(f"exported weight {name!r} has shape {tuple(tensor.shape)}, the model expects "
                             f"{tuple(expected[name])}")
        seen.add(name)
        yield name, tensor
    missing = sorted(n for n in expected if n not in seen and not n.startswith(tuple(vision_prefixes)))
    if missing:
        raise KeyError(f"the export lacks {len(missing)} language-model weights, e.g. {missing[:3]}")
