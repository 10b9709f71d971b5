"""Data planes of the ``vllm`` engine's weight updates (vLLM's weight-transfer backends).

* ``ipc`` — colocated: the bucket's tensors are placed on each of the engine's
  GPUs and shared by CUDA IPC handles (``torch.multiprocessing.reductions.reduce_tensor``),
  keyed by GPU UUID as vLLM's IPC backend expects; nothing is copied over a wire.
  The handles travel pickled (``ipc_handles_pickled``), which vLLM accepts only
  with ``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` (the engine sets it).
* ``nccl`` — disaggregated: this process is rank 0 of a group with the engine's
  workers and broadcasts each bucket from its own GPU (vLLM's NCCL trainer
  helpers, shared with :mod:`plugins.rollout.remote_weights`); the metadata is
  :class:`plugins.serving.weight_transfer.UpdateInfo`, the same as the HTTP protocol's.
"""

from __future__ import annotations

import base64
import pickle
from dataclasses import dataclass, field
from typing import Any, Sequence

from plugins.serving.weight_transfer import InitInfo, UpdateInfo, dtype_name


@dataclass
class Prepared:
    """One bucket ready for ``update_weights``: its ``update_info`` and whatever must stay alive meanwhile."""

    info: dict[str, Any]
    tensors: list[tuple[str, Any]] = field(default_factory=list)
    keep_alive: list[Any] = field(default_factory=list)


def cast_bucket(bucket: Sequence[tuple[str, Any]], dtype: str | None) -> list[tuple[str, Any]]:
    """Detached, contiguous tensors in ``dtype`` (None: unchanged)."""
    import torch

    target = getattr(torch, dtype) if dtype else None
    return [(name, (t.detach().to(target) if target is not None else t.detach()).contiguous()) for name, t in bucket]


class IPCTransport:
    def __init__(self, dtype: str | None, devices: Sequence[int]) -> None:
        self.dtype = dtype
        self.devices = list(devices)

    def init_info(self, world_size: int) -> dict[str, Any]:
        return {}

    def join(self) -> None:
        return None

    def prepare(self, bucket: Sequence[tuple[str, Any]]) -> Prepared:
        import torch
        from torch.multiprocessing.reductions import reduce_tensor

        tensors = cast_bucket(bucket, self.dtype)
        keep: list[Any] = []
        handles: list[dict[str, Any]] = []
        for _, tensor in tensors:
            per_gpu = {}
            for index in self.devices:  # every TP worker finds a copy on its own GPU
                local = tensor.to(torch.device("cuda", index)).contiguous()
                keep.append(local)
                per_gpu[str(torch.cuda.get_device_properties(index).uuid)] = reduce_tensor(local)
            handles.append(per_gpu)
        info = {"names": [n for n, _ in tensors], "dtype_names": [dtype_name(t.dtype) for _, t in tensors],
                "shapes": [list(t.shape) for _, t in tensors],
                "ipc_handles_pickled": base64.b64encode(pickle.dumps(handles)).decode("ascii")}
        return Prepared(info, tensors, keep)

    def send(self, prepared: Prepared) -> None:
        return None  # the handles are the transfer


class NCCLTransport:
    def __init__(self, dtype: str | None, master_address: str, bucket_bytes: int = 256 << 20) -> None:
        self.dtype = dtype
        self.master_address = master_address
        self.bucket_bytes = bucket_bytes
        self.inner: Any = None

    def init_info(self, world_size: int) -> dict[str, Any]:
        from plugins.rollout.remote_weights import _NcclTransport

        self.inner = _NcclTransport(InitInfo(self.master_address, 0, rank_offset=1, world_size=1 + world_size))
        return self.inner.info.as_json()

    def join(self) -> None:
        self.inner.join()

    def prepare(self, bucket: Sequence[tuple[str, Any]]) -> Prepared:
        tensors = cast_bucket(bucket, self.dtype)
        info = UpdateInfo.for_tensors(tensors, packed=True, buffer_bytes=self.bucket_bytes)
        return Prepared(info.as_json(), tensors)

    def send(self, prepared: Prepared) -> None:
        info = UpdateInfo.parse(prepared.info)
        self.inner.send(info, prepared.tensors)


def make_transport(options: Any, engine_dtype: str) -> IPCTransport | NCCLTransport:
    dtype = engine_dtype if options.transfer_dtype == "same" else options.transfer_dtype
    if options.weight_transfer == "ipc":
        return IPCTransport(dtype, range(options.tensor_parallel_size))
    return NCCLTransport(dtype, options.nccl_master_address)
