"""Entry-point module: registers the built-in trainer backends."""

from core import hookimpl


@hookimpl
def scalecua_register_trainers(registry):  # type: ignore[no-untyped-def]
    registry.register(
        "torch",
        "trainers.torch_backend:create_torch_trainer",
        options="trainers.torch_backend:TorchTrainerOptions",
        description="GRPO/DAPO on a Hugging Face Qwen-VL model with PyTorch (CPU or one GPU), vision tower frozen",
    )
    registry.register(
        "torch-fsdp",
        "trainers.fsdp:create_fsdp_trainer",
        options="trainers.fsdp:FSDPTrainerOptions",
        description="the torch backend sharded over processes with FSDP2 (torchrun -m trainers.fsdp_run, or Ray)",
    )
    registry.register(
        "megatron",
        "trainers.megatron.backend:create_megatron_trainer",
        options="trainers.megatron.backend:MegatronTrainerOptions",
        description="Qwen-VL on megatron-core via Megatron-Bridge (tensor parallel, distributed optimizer; GPUs)",
    )
