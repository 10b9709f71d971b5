"""Entry-point module: registers the ``qwen-vl`` model family (Qwen3-VL, Qwen2.5-VL, Qwen2-VL)."""

from core import hookimpl


@hookimpl
def scalecua_register_models(registry):
    registry.register(
        "qwen-vl",
        "plugins.qwen_vl.model:QwenVLModel",
        options="plugins.qwen_vl.model:QwenVLOptions",
        description="Qwen-VL family (qwen3_vl, qwen2_5_vl, qwen2_vl) from a local directory or a tiny config",
    )
