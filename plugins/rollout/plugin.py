"""Entry-point module: registers the built-in rollout engines."""

from core import hookimpl


@hookimpl
def scalecua_register_rollout_engines(registry):  # type: ignore[no-untyped-def]
    registry.register(
        "hf",
        "plugins.rollout.hf:create_hf_engine",
        options="plugins.rollout.hf:HFEngineOptions",
        description="in-process Hugging Face sampling (batched, seeded) with in-place weight updates",
    )
    registry.register(
        "openai-compatible",
        "plugins.rollout.openai_compatible:create_openai_compatible_engine",
        options="plugins.rollout.openai_compatible:OpenAICompatibleOptions",
        description="remote generation on vllm serve / plugins.serving (token ids, logprobs, vLLM weight transfer)",
    )
    registry.register(
        "vllm",
        "plugins.rollout.vllm_engine:create_vllm_engine",
        options="plugins.rollout.vllm_engine:VLLMEngineOptions",
        description="vLLM's in-process AsyncLLM (token-id prompts, tensor parallel, CUDA-IPC/NCCL weight transfer)",
    )
    registry.register(
        "simulated",
        "plugins.rollout.simulated:create_simulated_engine",
        options="plugins.rollout.simulated:SimulatedPolicyOptions",
        description="a SIMULATION of a policy (seeded done/wait per turn, no model) for pipeline benchmarks",
    )
