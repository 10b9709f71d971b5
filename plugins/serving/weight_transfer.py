"""The data side of vLLM's weight-transfer protocol, shared by the trainer-side client and ``plugins.serving``.

vLLM's RL weight sync is a control plane over HTTP plus a data plane of
collective broadcasts::

    POST /init_weight_transfer_engine {"init_info": {master_address, master_port, rank_offset, world_size}}
    POST /start_weight_update          (one update session)
    POST /update_weights               {"update_info": {names, dtype_names, shapes, packed, ...}}  (repeatable)
    POST /finish_weight_update

The trainer is rank 0 of a process group whose other ranks are the server's
workers (``rank_offset`` onwards); while ``/update_weights`` is in flight the
trainer broadcasts the tensors named in ``update_info``. vLLM's ``nccl``
backend broadcasts over NCCL; this module implements the same group and
packing over Gloo (CPU tensors), so the protocol runs end to end on machines
without GPUs. ``init_info`` and ``update_info`` have exactly the fields of
vLLM's NCCL backend.

Packing: tensors travel as raw bytes. With ``packed`` the bytes of several
tensors are concatenated and broadcast at once; a buffer is flushed as soon
as its size *exceeds* ``packed_buffer_size_bytes`` (vLLM's rule), so sender
and receiver derive the same grouping from the metadata alone.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping, Sequence

DEFAULT_PACKED_BUFFER_BYTES = 256 << 20
DEFAULT_PACKED_NUM_BUFFERS = 2

#: dtypes the wire accepts, by the name vLLM uses (``str(torch.float32).split(".")[-1]``)
DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")


class WeightTransferProtocolError(ValueError):
    """``init_info`` / ``update_info`` that does not follow the protocol; the message says which field."""


def dtype_name(dtype: Any) -> str:
    return str(dtype).split(".")[-1]


@dataclass(frozen=True)
class InitInfo:
    """Rendezvous of the trainer (rank 0, hosting the store) and the server's workers."""

    master_address: str
    master_port: int
    rank_offset: int
    world_size: int

    @classmethod
    def parse(cls, raw: Any) -> InitInfo:
        data = _require_mapping(raw, "init_info")
        _check_keys(data, {"master_address", "master_port", "rank_offset", "world_size"}, "init_info")
        info = cls(
            master_address=_typed(data, "master_address", str, "init_info"),
            master_port=_typed(data, "master_port", int, "init_info"),
            rank_offset=_typed(data, "rank_offset", int, "init_info"),
            world_size=_typed(data, "world_size", int, "init_info"),
        )
        if not 0 < info.master_port < 65536:
            raise WeightTransferProtocolError(f"init_info.master_port {info.master_port} is not a TCP port")
        if info.rank_offset < 1 or info.world_size <= info.rank_offset:
            raise WeightTransferProtocolError(
                f"init_info: rank_offset={info.rank_offset}, world_size={info.world_size}: the trainer is rank 0, "
                "so rank_offset must be >= 1 and world_size > rank_offset"
            )
        return info

    def as_json(self) -> dict[str, Any]:
        return {"master_address": self.master_address, "master_port": self.master_port,
                "rank_offset": self.rank_offset, "world_size": self.world_size}


@dataclass(frozen=True)
class UpdateInfo:
    """The tensors of one ``/update_weights`` call, in broadcast order."""

    names: list[str]
    dtype_names: list[str]
    shapes: list[list[int]]
    packed: bool = False
    packed_buffer_size_bytes: int = DEFAULT_PACKED_BUFFER_BYTES
    packed_num_buffers: int = DEFAULT_PACKED_NUM_BUFFERS
    sizes: list[int] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def parse(cls, raw: Any) -> UpdateInfo:
        data = _require_mapping(raw, "update_info")
        allowed = {"names", "dtype_names", "shapes", "packed", "packed_buffer_size_bytes", "packed_num_buffers"}
        _check_keys(data, allowed, "update_info", required={"names", "dtype_names", "shapes"})
        names = _str_list(data["names"], "update_info.names")
        dtypes = _str_list(data["dtype_names"], "update_info.dtype_names")
        shapes = data["shapes"]
        if not isinstance(shapes, list) or not all(
            isinstance(s, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in s)
            for s in shapes
        ):
            raise WeightTransferProtocolError("update_info.shapes must be a list of shapes (lists of ints >= 0)")
        if not (len(names) == len(dtypes) == len(shapes)):
            raise WeightTransferProtocolError(
                f"update_info: names ({len(names)}), dtype_names ({len(dtypes)}) and shapes ({len(shapes)}) "
                "must have the same length"
            )
        for name, dt in zip(names, dtypes):
            if dt not in DTYPE_NAMES:
                raise WeightTransferProtocolError(
                    f"update_info.dtype_names: {dt!r} (for {name!r}) is not one of {', '.join(DTYPE_NAMES)}"
                )
        packed = data.get("packed", False)
        if not isinstance(packed, bool):
            raise WeightTransferProtocolError("update_info.packed must be true or false")
        buffer = data.get("packed_buffer_size_bytes", DEFAULT_PACKED_BUFFER_BYTES)
        if not isinstance(buffer, int) or isinstance(buffer, bool) or buffer <= 0:
            raise WeightTransferProtocolError("update_info.packed_buffer_size_bytes must be a positive integer")
        num_buffers = data.get("packed_num_buffers", DEFAULT_PACKED_NUM_BUFFERS)
        if not isinstance(num_buffers, int) or isinstance(num_buffers, bool) or num_buffers <= 0:
            raise WeightTransferProtocolError("update_info.packed_num_buffers must be a positive integer")
        return cls.build(names, dtypes, shapes, packed=packed, buffer_bytes=buffer, num_buffers=num_buffers)

    @classmethod
    def build(cls, names: Sequence[str], dtypes: Sequence[str], shapes: Sequence[Sequence[int]], *, packed: bool,
              buffer_bytes: int, num_buffers: int = DEFAULT_PACKED_NUM_BUFFERS) -> UpdateInfo:
        import torch

        sizes = [math.prod(s) * getattr(torch, d).itemsize for d, s in zip(dtypes, shapes)]
        return cls(list(names), list(dtypes), [list(s) for s in shapes], packed, buffer_bytes, num_buffers, sizes)

    @classmethod
    def for_tensors(cls, tensors: Sequence[tuple[str, Any]], *, packed: bool = True,
                    buffer_bytes: int = DEFAULT_PACKED_BUFFER_BYTES) -> UpdateInfo:
        return cls.build([n for n, _ in tensors], [dtype_name(t.dtype) for _, t in tensors],
                         [list(t.shape) for _, t in tensors], packed=packed, buffer_bytes=buffer_bytes)

    def as_json(self) -> dict[str, Any]:
        return {"names": self.names, "dtype_names": self.dtype_names, "shapes": self.shapes, "packed": self.packed,
                "packed_buffer_size_bytes": self.packed_buffer_size_bytes,
                "packed_num_buffers": self.packed_num_buffers}

    def broadcast_groups(self) -> list[list[int]]:
        """Indices of the tensors in each broadcast, in order (one tensor each when not packed)."""
        if not self.packed:
            return [[i] for i in range(len(self.names))]
        groups: list[list[int]] = []
        current: list[int] = []
        total = 0
        for i, size in enumerate(self.sizes):
            current.append(i)
            total += size
            if total > self.packed_buffer_size_bytes:
                groups.append(current)
                current, total = [], 0
        if current:
            groups.append(current)
        return groups


class GlooChannel:
    """A process group of the trainer (rank 0) and a server's workers over Gloo, outside torch's default group.

    Rank 0 hosts the TCP store at ``master_address:master_port`` (as vLLM's
    stateless NCCL group does), so the trainer never needs a port on the server;
    with ``master_port`` 0 the store picks a free port and :attr:`info` holds it.
    Creating a channel only opens the store; :meth:`join` blocks until every
    rank has joined.
    """

    def __init__(self, info: InitInfo, rank: int, *, timeout_s: float = 600.0) -> None:
        import torch.distributed as dist

        if not 0 <= rank < info.world_size:
            raise WeightTransferProtocolError(f"rank {rank} is outside the group of {info.world_size}")
        self.rank = rank
        self._timeout = datetime.timedelta(seconds=timeout_s)
        self._store = dist.TCPStore(info.master_address, info.master_port, info.world_size, is_master=rank == 0,
                                    timeout=self._timeout, wait_for_workers=False)
        self.info = replace(info, master_port=self._store.port) if rank == 0 else info
        self._group: Any = None

    def join(self) -> None:
        import torch.distributed as dist

        self._group = dist.ProcessGroupGloo(self._store, self.rank, self.info.world_size, self._timeout)

    def broadcast(self, buffer: Any) -> None:
        """Broadcast a contiguous uint8 CPU tensor from rank 0 (in place on the other ranks)."""
        import torch.distributed as dist

        if self._group is None:
            raise RuntimeError("GlooChannel.broadcast before join()")
        options = dist.BroadcastOptions()
        options.rootRank = 0
        options.rootTensor = 0
        self._group.broadcast([buffer], options).wait()


def send_tensors(channel: GlooChannel, info: UpdateInfo, tensors: Sequence[tuple[str, Any]]) -> None:
    """Rank 0: broadcast ``tensors`` (the ones ``info`` describes, in its order)."""
    import torch

    if [n for n, _ in tensors] != info.names:
        raise WeightTransferProtocolError("send_tensors: the tensors are not the ones update_info names, in order")
    for group in info.broadcast_groups():
        parts = [tensors[i][1].detach().to("cpu").contiguous().reshape(-1).view(torch.uint8) for i in group]
        channel.broadcast(parts[0] if len(parts) == 1 else torch.cat(parts))


def receive_tensors(channel: GlooChannel, info: UpdateInfo) -> Iterator[list[tuple[str, Any]]]:
    """Other ranks: yield the received tensors one broadcast at a time (bounded memory)."""
    import torch

    for group in info.broadcast_groups():
        buffer = torch.empty(sum(info.sizes[i] for i in group), dtype=torch.uint8)
        channel.broadcast(buffer)
        out: list[tuple[str, Any]] = []
        offset = 0
        for i in group:
            # clone first: a byte slice at an odd offset cannot be viewed as a wider dtype
            raw = buffer[offset: offset + info.sizes[i]].clone()
            offset += info.sizes[i]
            out.append((info.names[i], raw.view(getattr(torch, info.dtype_names[i])).reshape(info.shapes[i])))
        yield out


def _require_mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise WeightTransferProtocolError(f"{where} must be a JSON object, got {type(raw).__name__}")
    return raw


def _check_keys(data: Mapping[str, Any], allowed: set[str], where: str, required: set[str] | None = None) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise WeightTransferProtocolError(f"{where}: unknown field(s) {', '.join(unknown)}; "
                                          f"expected {', '.join(sorted(allowed))}")
    missing = sorted((required if required is not None else allowed) - set(data))
    if missing:
        raise WeightTransferProtocolError(f"{where}: missing field(s) {', '.join(missing)}")


def _typed(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise WeightTransferProtocolError(f"{where}.{key} must be a {kind.__name__}, got {value!r}")
    return value


def _str_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WeightTransferProtocolError(f"{where} must be a list of strings")
    return value
