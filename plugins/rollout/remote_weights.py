"""Trainer side of vLLM's weight-update HTTP protocol, for rollout engines behind a server.

One weight-sync session of the engine (:mod:`core.weight_sync`) is one update session of the server::

    begin:   POST /pause?mode=wait                        (optional: no generation sees half-updated weights)
             POST /start_weight_update                                  (Hugging Face names)
    bucket:  POST /update_weights {"update_info": ...}    per bucket, while the bucket is broadcast
    commit:  POST /finish_weight_update
             POST /resume
    abort:   POST /resume (best effort), and the transfer group is discarded

The first update also rendezvous: ``GET /get_world_size``, then
``POST /init_weight_transfer_engine`` while the trainer opens its side of the
group as rank 0 (its TCP store listens on the trainer for the server's workers).
The data plane is ``gloo`` (:mod:`plugins.serving.weight_transfer`, CPU tensors; what
``plugins.serving`` speaks; vLLM ships no Gloo backend) or ``nccl``: vLLM's own
trainer-side engine (``NCCLTrainerWeightTransferEngine``, vLLM >= 0.33, a GPU on the
trainer, and a server started as ``VLLM_SERVER_DEV_MODE=1 vllm serve ...
--weight-transfer-config '{"backend": "nccl"}'``, since vLLM mounts these routes only in
dev mode). That engine issues the same requests itself through a client over this
session's HTTP calls, and declares a round's tensors before broadcasting them, so the
``nccl`` path sends one ``/update_weights`` per session at commit instead of one per
bucket. It is not exercised on machines without vLLM and a GPU. After any failure the
group is discarded and the next update rendezvous again, because a broken broadcast
leaves the two sides out of step; updates are never retried blindly (the protocol is
stateful).
"""

from __future__ import annotations

import abc
import socket
import threading
from typing import Any, Callable, Iterable, Literal, Sequence
from urllib.parse import urlsplit

import structlog
from pydantic import BaseModel, ConfigDict, Field

from core import weight_sync
from core.weight_sync import WeightSession, iter_buckets
from plugins.serving.weight_transfer import GlooChannel, InitInfo, UpdateInfo, send_tensors

log = structlog.get_logger(__name__)


class WeightSyncError(weight_sync.WeightSyncError):
    """A weight update against a remote server failed; the message names the step and the server's reason."""


class WeightTransferOptions(BaseModel):
    """How the trainer's weights reach a remote server (vLLM's weight-transfer protocol)."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["gloo", "nccl"] = Field(
        "gloo", description="data plane: gloo (CPU; plugins.serving) or nccl (vLLM on GPUs; needs vllm on the trainer)"
    )
    master_address: str | None = Field(
        None, description="address at which the server reaches the trainer (default: the local address that "
                          "routes to the server)"
    )
    master_port: int = Field(0, ge=0, le=65535, description="rendezvous port on the trainer (0: a free port)")
    bucket_bytes: int = Field(256 << 20, ge=1, description="bytes of weights per /update_weights call")
    packed: bool = Field(True, description="broadcast tensors packed into buffers (False: one broadcast per tensor)")
    packed_buffer_bytes: int | None = Field(
        None, ge=1, description="bytes per packed broadcast (default: 4 MiB for gloo, whose loopback/TCP throughput "
                                "peaks there, and the whole bucket for nccl)"
    )
    #: vLLM's /pause (mode wait, clear_cache true) drains the running requests and clears the KV and prefix
    #: caches, so nothing computed with the old weights is reused after the update; without the pause a cached
    #: prefix can cross a weight version
    pause_generation: bool = Field(True, description="pause the server's generation during each update session "
                                                     "(it also clears the server's prefix cache)")
    timeout_s: float = Field(600.0, gt=0, description="rendezvous, broadcast and HTTP timeout of a weight update")


Post = Callable[[str, dict[str, Any] | None], dict[str, Any]]
Get = Callable[[str], dict[str, Any]]


class RemoteWeightSync:
    """Pushes (name, tensor) buckets to a server through ``post``/``get`` (JSON in, JSON out, raising on errors)."""

    def __init__(self, options: WeightTransferOptions, base_url: str, *, post: Post, get: Get) -> None:
        self.options = options
        self.base_url = base_url
        self._post = post
        self._get = get
        self._transport: _Transport | None = None
        self.session = WeightSession(f"weight sync with {base_url}")
        self._paused = False
        self.updates = 0
        self._tensors = 0

    @property
    def version(self) -> int | None:
        return self.session.version

    def begin(self, version: int) -> None:
        self.session.begin(version)
        try:
            transport = self._ensure_transport()
            if self.options.pause_generation:
                self._post("/pause?mode=wait", None)
                self._paused = True
            if not transport.drives_round:
                self._post("/start_weight_update", None)
        except BaseException:
            self.abort()
            raise
        self._tensors = 0

    def send(self, weights: Iterable[tuple[str, Any]]) -> None:
        self.session.bucket()
        transport = self._transport
        assert transport is not None  # begin() made it
        try:
            for bucket in iter_buckets(weights, self.options.bucket_bytes):
                info = UpdateInfo.for_tensors(bucket, packed=self.options.packed, buffer_bytes=self._buffer_bytes)
                if transport.drives_round:
                    transport.send(info, bucket)
                else:
                    self._while_posting("/update_weights", {"update_info": info.as_json()},
                                        lambda: transport.send(info, bucket))
                self._tensors += len(bucket)
        except BaseException:
            self._transport = None  # a failed broadcast leaves the group out of step: rendezvous again next time
            raise

    def commit(self) -> int:
        self.session.bucket()
        transport = self._transport
        try:
            if transport is not None and transport.drives_round:
                transport.commit()
            else:
                self._post("/finish_weight_update", None)
            self._resume()
        except BaseException:
            self.abort()
            raise
        self.updates += 1
        version = self.session.commit()
        log.debug("remote weights updated", tensors=self._tensors, version=version)
        return version

    def abort(self) -> None:
        """End the session without committing: generation resumes (best effort), the group is discarded."""
        self.session.abort()
        self._transport = None
        try:
            self._resume()
        except Exception as exc:  # the server may be what failed; the next begin() finds out
            self._paused = False
            log.warning("could not resume the server's generation after a failed weight update", error=str(exc))

    def forget(self) -> None:
        """The server restarted: the weights it was given, its transfer group and its pause are gone. The
        version becomes None (the server's own weights) and the next :meth:`begin` rendezvous again."""
        self.session.version = None
        self._transport = None
        self._paused = False

    def _resume(self) -> None:
        if self._paused:
            self._post("/resume", None)
            self._paused = False

    @property
    def _buffer_bytes(self) -> int:
        if self.options.packed_buffer_bytes is not None:
            return self.options.packed_buffer_bytes
        return min(self.options.bucket_bytes, 4 << 20) if self.options.backend == "gloo" else self.options.bucket_bytes

    # -- rendezvous ---------------------------------------------------------------------

    def _ensure_transport(self) -> _Transport:
        if self._transport is not None:
            return self._transport
        server_world = self._get("/get_world_size").get("world_size")
        if not isinstance(server_world, int) or server_world < 1:
            raise WeightSyncError(f"{self.base_url}/get_world_size answered {server_world!r}, not a positive integer")
        address = self.options.master_address or route_address(urlsplit(self.base_url).hostname or "127.0.0.1")
        info = InitInfo(address, self.options.master_port, rank_offset=1, world_size=1 + server_world)
        transport: _Transport
        if self.options.backend == "gloo":
            transport = _GlooTransport(info, self.options.timeout_s)
            self._while_posting("/init_weight_transfer_engine", {"init_info": transport.info.as_json()},
                                transport.join)
        else:
            transport = _NcclTransport(info, ServerClient(self._post), packed=self.options.packed,
                                       buffer_bytes=self._buffer_bytes)
            transport.join()
        log.info("weight transfer group ready", backend=self.options.backend, server=self.base_url,
                 world_size=info.world_size, master=f"{transport.info.master_address}:{transport.info.master_port}")
        self._transport = transport
        return transport

    def _while_posting(self, path: str, body: dict[str, Any], collective: Callable[[], None]) -> None:
        """POST ``body`` (which blocks server-side until the collective completes) while running ``collective``."""
        outcome: dict[str, BaseException] = {}

        def call() -> None:
            try:
                self._post(path, body)
            except BaseException as exc:  # re-raised in the caller's thread
                outcome["error"] = exc

        caller = threading.Thread(target=call, name=f"weight-sync{path}", daemon=True)
        caller.start()
        collective_error: BaseException | None = None
        try:
            collective()
        except BaseException as exc:
            collective_error = exc
        caller.join(self.options.timeout_s)
        if "error" in outcome:  # the server's reason is more useful than the broadcast's
            raise outcome["error"]
        if caller.is_alive():
            raise WeightSyncError(f"{self.base_url}{path} did not answer within {self.options.timeout_s:.0f} s")
        if collective_error is not None:
            raise WeightSyncError(f"{path}: the {self.options.backend} broadcast failed: {collective_error}") \
                from collective_error


class _Transport(abc.ABC):
    """How tensors reach the server's workers once it joined the group: gloo (here) or vLLM's NCCL helpers."""

    info: InitInfo
    #: the transport runs the server's update round itself (start / update / finish); the session only pauses
    drives_round = False

    def commit(self) -> None:
        """Deliver what :meth:`send` was given, for transports that drive the round (``drives_round``)."""

    @abc.abstractmethod
    def join(self) -> None:
        """Join the weight-transfer group (the server joins from its side while this runs)."""

    @abc.abstractmethod
    def send(self, info: UpdateInfo, tensors: Sequence[tuple[str, Any]]) -> None:
        """Broadcast ``tensors`` as described by ``info``."""


class _GlooTransport(_Transport):
    def __init__(self, info: InitInfo, timeout_s: float) -> None:
        self.channel = GlooChannel(info, 0, timeout_s=timeout_s)
        self.info = self.channel.info

    def join(self) -> None:
        self.channel.join()

    def send(self, info: UpdateInfo, tensors: Sequence[tuple[str, Any]]) -> None:
        send_tensors(self.channel, info, tensors)


class _NcclTransport(_Transport):
    """vLLM's trainer-side NCCL engine (``NCCLTrainerWeightTransferEngine``, vLLM >= 0.33).

    That engine drives the server's RPCs itself (``init_weight_transfer_engine`` during the rendezvous;
    ``start_weight_update``, ``update_weights`` concurrently with the broadcast, ``finish_weight_update``
    per round) through a client, and declares every tensor of a round up front (``WeightSource.metadata``).
    So this transport takes over the round: :meth:`send` collects the session's tensors (references, no
    copies) and :meth:`commit` hands them to ``send_weights()`` in one broadcast.
    """

    drives_round = True

    def __init__(self, info: InitInfo, client: Any, *, packed: bool, buffer_bytes: int) -> None:
        """``client``: vLLM's ``VLLMWeightSyncClient`` protocol (:class:`ServerClient` over HTTP, or the
        in-process engine's adapter)."""
        try:
            from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource
            from vllm.distributed.weight_transfer.nccl_engine import (
                NCCLTrainerInitInfo,
                NCCLTrainerWeightTransferEngine,
            )
        except ImportError as exc:
            raise WeightSyncError(
                "rollout.options.weight_transfer.backend: 'nccl' needs vLLM's NCCL weight-transfer engine on the "
                f"trainer ({exc}); install the gpu extra (pip install 'scalecua[gpu]', vLLM >= 0.33) or use backend "
                "'gloo'"
            ) from None
        if info.master_port == 0:
            with socket.socket() as probe:  # NCCL's store cannot pick its own port and report it back
                probe.bind((info.master_address, 0))
                info = InitInfo(info.master_address, probe.getsockname()[1], info.rank_offset, info.world_size)
        self.info = info
        self._client = client
        self._source_type = _tensor_source_type(WeightSource, ParamMeta)
        self._init_info = NCCLTrainerInitInfo(
            master_address=info.master_address, master_port=info.master_port, world_size=info.world_size, rank=0,
            packed=packed, packed_buffer_size_bytes=buffer_bytes,
        )
        self._engine_type = NCCLTrainerWeightTransferEngine
        self.engine: Any = None
        self._pending: list[tuple[str, Any]] = []

    def join(self) -> None:
        # the engine posts /init_weight_transfer_engine itself, concurrently with opening rank 0
        self.engine = self._engine_type.trainer_init(self._init_info, client=self._client,
                                                     source=self._source_type([]))

    def send(self, info: UpdateInfo, tensors: Sequence[tuple[str, Any]]) -> None:
        self._pending.extend(tensors)

    def commit(self) -> None:
        tensors, self._pending = self._pending, []
        self.engine.source = self._source_type(tensors)
        self.engine.send_weights()  # start_weight_update, update_weights + broadcast, finish_weight_update


class ServerClient:
    """vLLM's ``VLLMWeightSyncClient`` protocol over this session's ``post`` (the server's HTTP routes)."""

    def __init__(self, post: Post) -> None:
        self._post = post

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self._post("/init_weight_transfer_engine", {"init_info": init_info})

    def start_weight_update(self) -> None:
        self._post("/start_weight_update", None)

    def update_weights(self, update_info: dict[str, Any]) -> None:
        self._post("/update_weights", {"update_info": update_info})

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self._post("/finish_weight_update", None if weight_version is None else {"weight_version": weight_version})


def _tensor_source_type(weight_source: type, param_meta: type) -> type:
    """A vLLM ``WeightSource`` over one round's (name, tensor) list, full tensors moved to the current GPU."""
    from functools import cached_property

    class TensorSource(weight_source):  # type: ignore[misc, valid-type]
        def __init__(self, tensors: Sequence[tuple[str, Any]]) -> None:
            self._tensors = list(tensors)

        @cached_property
        def metadata(self) -> list[Any]:
            return [param_meta(name, t.dtype, tuple(t.shape)) for name, t in self._tensors]

        def iter_full(self) -> Iterable[tuple[str, Any]]:
            import torch

            device = torch.device("cuda", torch.cuda.current_device())
            for name, tensor in self._tensors:
                yield name, tensor.to(device)

    return TensorSource


def route_address(host: str) -> str:
    """The local address this machine uses to reach ``host`` (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
