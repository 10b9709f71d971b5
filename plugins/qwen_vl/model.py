"""The ``qwen-vl`` model family: Qwen3-VL, Qwen2.5-VL and Qwen2-VL from a local directory or a tiny config.

``path`` points at a Hugging Face directory (config + tokenizer + image
processor config, weights optional: without weights the model is built from
the config with seeded random weights). ``tiny`` builds a ~1 M-parameter model
and a BPE tokenizer trained in-process, for tests and CPU runs.
:meth:`QwenVLModel.save_pretrained_dir` writes a tiny model as such a
directory, so the directory path is exercised without a download.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.interfaces import PolicyModel
from plugins.qwen_vl.packed_attention import use_varlen_sdpa
from plugins.qwen_vl.renderer import QwenVLRenderer
from plugins.qwen_vl.pretrain import PretrainSettings, cache_key, pretrained_dir
from plugins.qwen_vl.tokenizer import DEFAULT_TINY_VOCAB_SIZE, build_tiny_tokenizer, load_tokenizer
from plugins.qwen_vl.vision import Family, ImageProcessor, VisionSettings

log = structlog.get_logger(__name__)

_DTYPES = ("float32", "bfloat16", "float16")
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


class TinyModelSettings(BaseModel):
    """A tiny random Qwen-VL built from a config (defaults: ~0.9 M parameters)."""

    model_config = ConfigDict(extra="forbid")

    family: Family = Field("qwen3_vl", description="architecture: qwen3_vl, qwen2_5_vl or qwen2_vl")
    vocab_size: int = Field(DEFAULT_TINY_VOCAB_SIZE, ge=300, le=4096, description="tiny BPE tokenizer vocabulary")
    hidden_size: int = Field(128, ge=16, description="language-model hidden size")
    num_layers: int = Field(2, ge=1, description="language-model decoder layers")
    num_heads: int = Field(4, ge=1, description="attention heads")
    num_kv_heads: int = Field(2, ge=1, description="key/value heads (grouped-query attention)")
    head_dim: int = Field(32, ge=8, description="attention head size (Qwen2/2.5-VL need hidden_size / num_heads)")
    intermediate_size: int = Field(256, ge=16, description="MLP width")
    vision_depth: int = Field(2, ge=1, description="vision transformer blocks")
    vision_hidden_size: int = Field(64, ge=16, description="vision transformer width")
    vision_heads: int = Field(4, ge=1, description="vision attention heads")
    mrope_section: list[int] | None = Field(
        None, description="M-RoPE (temporal, height, width) split of head_dim/2; default per family"
    )
    tie_word_embeddings: bool = Field(True, description="share the input embeddings with the LM head (as small Qwens)")
    pretrain: PretrainSettings | None = Field(
        None, description="start from a base pretrained on generic terminal requests (built once, cached: "
                          "plugins/qwen_vl/pretrain.py) instead of random weights")

    @model_validator(mode="after")
    def _check_shapes(self) -> TinyModelSettings:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.num_kv_heads}")
        if self.family != "qwen3_vl" and self.hidden_size != self.num_heads * self.head_dim:
            raise ValueError(
                f"{self.family} derives head_dim from hidden_size/num_heads: set head_dim="
                f"{self.hidden_size // self.num_heads} or hidden_size={self.num_heads * self.head_dim}"
            )
        if self.vision_hidden_size % self.vision_heads:
            raise ValueError(f"vision_hidden_size={self.vision_hidden_size} must be divisible by vision_heads")
        if self.mrope_section is not None:
            if len(self.mrope_section) != 3 or sum(self.mrope_section) != self.head_dim // 2:
                raise ValueError(
                    f"mrope_section {self.mrope_section} must be 3 numbers summing to head_dim/2 = {self.head_dim // 2}"
                )
        return self

    def resolved_mrope_section(self) -> list[int]:
        if self.mrope_section is not None:
            return list(self.mrope_section)
        half = self.head_dim // 2
        # Same proportions as the released checkpoints: Qwen3-VL [24,20,20], Qwen2/2.5-VL [16,24,24] of 64.
        first = round(half * (24 if self.family == "qwen3_vl" else 16) / 64)
        rest = half - first
        return [first, rest - rest // 2, rest // 2]


class QwenVLOptions(BaseModel):
    """Options of the ``qwen-vl`` model family: exactly one of ``path`` or ``tiny``."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(None, description="local Hugging Face directory (config, tokenizer, optional weights)")
    tiny: TinyModelSettings | None = Field(None, description="build a tiny random model instead of loading one")
    seed: int = Field(0, description="seed of random weights (tiny models, directories without weights); "
                                     "a pretrained tiny base has its own (tiny.pretrain.seed)")
    min_pixels: int | None = Field(None, ge=1, description="image processor lower pixel bound (default: model's)")
    max_pixels: int | None = Field(None, ge=1, description="image processor upper pixel bound (default: model's)")

    @model_validator(mode="after")
    def _one_source(self) -> QwenVLOptions:
        if (self.path is None) == (self.tiny is None):
            raise ValueError(
                "give exactly one of 'path' (a local model directory) or 'tiny' (settings of a tiny "
                "random model, e.g. tiny: {family: qwen3_vl})"
            )
        return self


class QwenVLModel(PolicyModel):
    """A Qwen-VL policy: tokenizer, image processor, chat renderer and the Hugging Face model."""

    def __init__(self, options: QwenVLOptions, **_: Any) -> None:
        self.options = options
        if options.path is not None:
            path = Path(options.path).expanduser()
            if not (path / "config.json").is_file():
                raise FileNotFoundError(
                    f"model.options.path: {str(path)!r} has no config.json; point it at a local Hugging Face "
                    "model directory, or use model.options.tiny"
                )
            self.path: Path | None = path
        else:
            self.path = None

    # -- components -------------------------------------------------------------------

    @cached_property
    def family(self) -> Family:
        if self.options.tiny is not None:
            return self.options.tiny.family
        model_type = self.hf_config().model_type
        if model_type not in ("qwen3_vl", "qwen2_5_vl", "qwen2_vl"):
            raise ValueError(
                f"{self.path}: model_type {model_type!r} is not a Qwen-VL (qwen3_vl, qwen2_5_vl, qwen2_vl)"
            )
        return model_type  # type: ignore[return-value]

    @cached_property
    def tokenizer(self) -> Any:
        if self.path is not None:
            return load_tokenizer(self.path)
        assert self.options.tiny is not None
        return build_tiny_tokenizer(self.options.tiny.vocab_size)

    @cached_property
    def image_processor(self) -> ImageProcessor:
        o = self.options
        if self.path is not None and (self.path / "preprocessor_config.json").is_file():
            return ImageProcessor.from_pretrained(self.path, min_pixels=o.min_pixels, max_pixels=o.max_pixels)
        return ImageProcessor(VisionSettings.for_family(self.family, min_pixels=o.min_pixels, max_pixels=o.max_pixels))

    def renderer(self) -> QwenVLRenderer:
        return self._renderer

    @cached_property
    def _renderer(self) -> QwenVLRenderer:
        return QwenVLRenderer(self.tokenizer, self.image_processor)

    def hf_config(self) -> Any:
        """The transformers config of the model (read from ``path`` or built for ``tiny``)."""
        return self._hf_config

    def vocab_size(self) -> int:
        config = self.hf_config()
        return int(getattr(config, "text_config", config).vocab_size)

    @cached_property
    def _hf_config(self) -> Any:
        if self.path is not None:
            from transformers import AutoConfig

            return AutoConfig.from_pretrained(str(self.path), local_files_only=True)
        assert self.options.tiny is not None
        return build_tiny_config(self.options.tiny, self.tokenizer)

    # -- PolicyModel ----------------------------------------------------------------------

    def load(self, *, dtype: str = "float32", device: str = "cpu") -> Any:
        import torch
        from transformers import AutoModelForImageTextToText

        if dtype not in _DTYPES:
            raise ValueError(f"dtype {dtype!r} is not supported: use one of {', '.join(_DTYPES)}")
        torch_dtype = getattr(torch, dtype)
        base = self.pretrained_base()
        if base is not None or (self.path is not None and any((self.path / f).is_file() for f in _WEIGHT_FILES)):
            model = AutoModelForImageTextToText.from_pretrained(
                str(base or self.path), dtype=torch_dtype, local_files_only=True
            )
        else:
            if self.path is not None:
                log.warning("no weights in model directory; using seeded random weights", path=str(self.path))
            # fork_rng: building the model must not disturb the caller's global RNG stream.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.options.seed)
                model = AutoModelForImageTextToText.from_config(self.hf_config(), dtype=torch_dtype)
        # sdpa call for call, except on packed rows, which it attends per sequence (plugins/qwen_vl/packed_attention)
        use_varlen_sdpa(model)
        renderer = self.renderer()
        model.generation_config.eos_token_id = list(renderer.stop_ids)
        model.generation_config.pad_token_id = renderer.pad_token_id
        # Plain sampling by default (transformers would otherwise apply top_k=50), with the tokens a policy
        # must never emit suppressed, so generate() samples from the distribution token_logprobs describes.
        model.generation_config.do_sample = True
        model.generation_config.top_k = 0
        model.generation_config.top_p = 1.0
        model.generation_config.suppress_tokens = list(renderer.suppress_ids)
        return model.to(device).eval()

    def pretrained_base(self) -> Path | None:
        """The cached pretrained base of a tiny model with ``pretrain`` settings (built on first use)."""
        tiny = self.options.tiny
        if tiny is None or tiny.pretrain is None:
            return None
        o = self.options
        key = cache_key(tiny.model_dump(exclude={"pretrain"}), tiny.pretrain,
                        {"min_pixels": o.min_pixels, "max_pixels": o.max_pixels})
        random_init = o.model_copy(update={"tiny": tiny.model_copy(update={"pretrain": None}),
                                           "seed": tiny.pretrain.seed})
        return pretrained_dir(key, tiny.pretrain, lambda: QwenVLModel(random_init))

    def vision_parameter_prefixes(self) -> tuple[str, ...]:
        return ("model.visual.",)

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"family": self.family, "seed": self.options.seed}
        if self.path is not None:
            info["path"] = str(self.path)
        else:
            assert self.options.tiny is not None
            info["tiny"] = self.options.tiny.model_dump()
        info["image_processor"] = vars(self.image_processor.settings)
        return info

    def model_inputs(self, input_ids: Any, images: Any, *, device: Any = "cpu") -> dict[str, Any]:
        from plugins.qwen_vl.forward import build_model_inputs

        return build_model_inputs(self.renderer(), input_ids, images, device=device)

    def packed_model_inputs(self, input_ids: Any, images: Any, *, device: Any = "cpu") -> dict[str, Any]:
        from plugins.qwen_vl.forward import build_packed_inputs

        return build_packed_inputs(self.renderer(), input_ids, images, device=device)

    def token_logprobs(self, module: Any, inputs: Any, *, temperature: float, suppress_ids: Any = (),
                       positions: Any = None, chunk_size: int | None = None, with_entropy: bool = False) -> Any:
        from plugins.qwen_vl.forward import DEFAULT_CHUNK_SIZE, token_logprobs

        return token_logprobs(module, dict(inputs), temperature=temperature, suppress_ids=suppress_ids,
                              positions=positions, chunk_size=chunk_size or DEFAULT_CHUNK_SIZE,
                              with_entropy=with_entropy)

    def model_directory(self, *, dtype: str = "float32") -> Path:
        """The configured directory, or (tiny models) this model written to a fresh temporary one."""
        if self.path is not None:
            return self.path
        import tempfile

        return self.save_pretrained_dir(tempfile.mkdtemp(prefix="scalecua-model-"), dtype=dtype)

    def save_pretrained_dir(self, directory: str | Path, *, dtype: str = "float32") -> Path:
        """Write config, weights, tokenizer (with chat template) and image processor config to ``directory``."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self.load(dtype=dtype).save_pretrained(str(out))
        self.tokenizer.save_pretrained(str(out))
        self.image_processor.save_pretrained(out)
        return out


def build_tiny_config(settings: TinyModelSettings, tokenizer: Any) -> Any:
    """A transformers config for a tiny model whose special-token ids match ``tokenizer``."""
    from transformers import AutoConfig

    vocab = tokenizer.get_vocab()
    token_ids = {
        "image_token_id": vocab["<|image_pad|>"],
        "video_token_id": vocab["<|video_pad|>"],
        "vision_start_token_id": vocab["<|vision_start|>"],
        "vision_end_token_id": vocab["<|vision_end|>"],
    }
    s = settings
    rope = {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": s.resolved_mrope_section()}
    text = {
        "vocab_size": len(tokenizer),
        "hidden_size": s.hidden_size,
        "intermediate_size": s.intermediate_size,
        "num_hidden_layers": s.num_layers,
        "num_attention_heads": s.num_heads,
        "num_key_value_heads": s.num_kv_heads,
        "max_position_embeddings": 32768,
        "rope_parameters": rope,
        "bos_token_id": vocab["<|endoftext|>"],
        "eos_token_id": vocab["<|im_end|>"],
        "pad_token_id": vocab["<|endoftext|>"],
    }
    vision: dict[str, Any] = {"depth": s.vision_depth, "num_heads": s.vision_heads}
    if s.family == "qwen3_vl":
        text["head_dim"] = s.head_dim
        rope["mrope_interleaved"] = True
        vision.update(
            hidden_size=s.vision_hidden_size,
            intermediate_size=2 * s.vision_hidden_size,
            out_hidden_size=s.hidden_size,
            num_position_embeddings=576,
            deepstack_visual_indexes=[s.vision_depth - 1],
        )
    elif s.family == "qwen2_5_vl":
        vision.update(
            hidden_size=s.vision_hidden_size,
            intermediate_size=2 * s.vision_hidden_size,
            out_hidden_size=s.hidden_size,
            fullatt_block_indexes=[s.vision_depth - 1],
        )
    else:  # qwen2_vl: embed_dim is the ViT width, hidden_size the merger's output (the LM width)
        vision.update(embed_dim=s.vision_hidden_size, hidden_size=s.hidden_size, mlp_ratio=2)
    return AutoConfig.for_model(
        s.family, text_config=text, vision_config=vision, tie_word_embeddings=s.tie_word_embeddings, **token_ids
    )
