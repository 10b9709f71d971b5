#!/usr/bin/env bash
# GPU checks of the scale plugins, one script, under 10 minutes on one GPU (H200 measured target).
#
#   bash bench/gpu_check.sh prepare     # on a machine WITH network: wheels the GPU machine lacks -> .whl/
#   bash bench/gpu_check.sh [--quick]   # on the GPU machine (no network needed once .whl/ is there)
#
# Checks (bench/gpu_check.py; prints ONE JSON object):
#   1. torch backend on the GPU: steps on a fixed batch (tiny Qwen3-VL), tokens/s, MFU; torch-fsdp
#      (one rank, NCCL) on the same batch: equal losses
#   2. megatron backend (Megatron-Bridge import of the same tiny model, TP=1, distributed optimizer):
#      per-step loss equal to the torch backend's on the same batch (fp32, tolerance in the JSON),
#      exported HF weights equal to the torch backend's after the same steps, tokens/s and MFU (bf16)
#   3. vllm engine, where vLLM is installed: generation, logprobs vs teacher-forced recompute,
#      CUDA-IPC weight update from the torch trainer on the same GPU
# Each check reports "ok" / "failed" with the error, so one missing package never hides the others.
# Extra wheels for prepare: GPU_CHECK_EXTRA_WHEELS="pkg==ver other==ver".
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELS=(
  "megatron-core==0.19.2" "megatron-bridge==0.6.2"
  "pydantic==2.12.5" "pydantic-core==2.41.5" "annotated-types==0.7.0" "typing-inspection==0.4.2"
  "omegaconf==2.3.0" "antlr4-python3-runtime==4.9.3" "structlog==25.5.0"
  "hydra-core==1.3.2" "qwen-vl-utils==0.0.14" "mistral-common==1.8.5" "diffusers==0.36.0"
)

if [ "${1:-}" = "prepare" ]; then
  grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
  mkdir -p .whl
  for spec in "${WHEELS[@]}" ${GPU_CHECK_EXTRA_WHEELS:-}; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform any -d .whl "$spec" \
      || python3 -m pip wheel -q --no-deps -w .whl "$spec" \
      || echo "prepare: could not fetch $spec" >&2  # (pip wheel: pure-Python sdists such as antlr4)
  done
  du -sh .whl >&2
  exit 0
fi

export PYTHONUNBUFFERED=1 CUDA_DEVICE_MAX_CONNECTIONS=1
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu-check-site \
    .whl/*.whl >&2 || echo "gpu_check: some wheels did not install" >&2
  export PYTHONPATH="/tmp/gpu-check-site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
# torchrun gives Megatron its process group (one rank); the helper runs every check in that rank
exec timeout 570 python3 -m torch.distributed.run --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29533 \
  bench/gpu_check.py "$@"
