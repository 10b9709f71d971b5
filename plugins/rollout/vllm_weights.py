"""Data planes of the ``vllm`` engine's weight updates (vLLM's weight-transfer backends).

* ``ipc`` — colocated: the bucket's tensors are placed on each of the engine's
  GPUs and shared by CUDA IPC handles (``torch.multiprocessing.reductions.reduce_tensor``),
  keyed by GPU UUID as vLLM's IPC backend expects; nothing is copied over a wire.
  The handles travel pickled (``ipc_handles_pickled``), which vLLM accepts only
  with ``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` (the engine sets it).
* ``nccl`` — disaggregated: this process is rank 0 of a group with the engine's
  workers and broadcasts from its own GPU through vLLM's trainer-side NCCL engine
  (shared with :mod:`plugins.rollout.remote_weights`), which drives the engine's
  init / start / update / finish calls itself through a client on this engine, so
  the session's buckets are collected and broadcast in one round at commit.
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
    drives_round = False

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
    """vLLM's trainer-side NCCL engine, which drives the engine's update round itself (``drives_round``)."""

    drives_round = True

    def __init__(self, dtype: str | None, master_address: str, bucket_bytes: int = 256 << 20) -> None:
        self.dtype = dtype
        self.master_address = master_address
        self.bucket_bytes = bucket_bytes
        self.inner: Any = None

    def connect(self, client: Any, world_size: int) -> None:
        """Rendezvous with the engine's workers; ``client`` is vLLM's weight-sync client protocol on the engine."""
        from plugins.rollout.remote_weights import _NcclTransport

        self.inner = _NcclTransport(InitInfo(self.master_address, 0, rank_offset=1, world_size=1 + world_size),
                                    client, packed=True, buffer_bytes=self.bucket_bytes)
        self.inner.join()

    def collect(self, bucket: Sequence[tuple[str, Any]]) -> None:
        tensors = cast_bucket(bucket, self.dtype)
        self.inner.send(UpdateInfo.for_tensors(tensors, packed=True, buffer_bytes=self.bucket_bytes), tensors)

    def commit(self) -> None:
        self.inner.commit()


def make_transport(options: Any, engine_dtype: str) -> IPCTransport | NCCLTransport:
    dtype = engine_dtype if options.transfer_dtype == "same" else options.transfer_dtype
    if options.weight_transfer == "ipc":
        return IPCTransport(dtype, range(options.tensor_parallel_size))
    return NCCLTransport(dtype, options.nccl_master_address)
