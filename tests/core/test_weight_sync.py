"""Weight sync as a session (:mod:`core.weight_sync`): the driver, the shared bookkeeping, the one bucket rule."""

from __future__ import annotations

from typing import Any, Iterable

import pytest
import torch

from core.interfaces import Generation, GenerationRequest, RolloutEngine
from core.weight_sync import WeightSession, WeightSyncError, iter_buckets, sync_weights


class RecordingEngine(RolloutEngine):
    """The contract kept with :class:`WeightSession`, recording what each session did."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.session = WeightSession("recording engine")
        self.fail_on = fail_on
        self.events: list[Any] = []
        self.weights: dict[str, torch.Tensor] = {}

    async def generate(self, request: GenerationRequest) -> Generation:
        return Generation(ids=[1], logprobs=[0.0], text="", finish_reason="stop", weight_version=self.weight_version)

    @property
    def weight_version(self) -> int | None:
        return self.session.version

    def begin_weight_update(self, version: int) -> None:
        self.session.begin(version)
        self.events.append(("begin", version))

    def update_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        self.session.bucket()
        bucket = list(weights)
        if any(name == self.fail_on for name, _ in bucket):
            raise KeyError(f"no weight {self.fail_on}")
        self.events.append(("bucket", [name for name, _ in bucket]))

    def commit_weight_update(self) -> None:
        self.events.append(("commit", self.session.commit()))

    def abort_weight_update(self) -> None:
        self.session.abort()
        self.events.append(("abort",))


class Exporter:
    def __init__(self, names: list[str], bucket_bytes: int = 8) -> None:
        self.names = names
        self.bucket_bytes = bucket_bytes

    def export_weights(self) -> Iterable[list[tuple[str, torch.Tensor]]]:
        return iter_buckets(((n, torch.zeros(2)) for n in self.names), self.bucket_bytes)  # 8 bytes each


def test_a_session_sends_every_bucket_then_commits_the_version() -> None:
    engine = RecordingEngine()
    assert sync_weights(Exporter(["a", "b", "c"]), engine, 0) == 3
    assert engine.events == [("begin", 0), ("bucket", ["a"]), ("bucket", ["b"]), ("bucket", ["c"]), ("commit", 0)]
    assert engine.weight_version == 0
    sync_weights(Exporter(["a"]), engine, 5)  # versions may skip (a resumed run), never repeat or go back
    for stale in (5, 3):
        with pytest.raises(WeightSyncError, match=f"weight version {stale} does not follow the current version 5"):
            sync_weights(Exporter(["a"]), engine, stale)
    assert engine.weight_version == 5


def test_a_failed_bucket_aborts_the_session_and_the_old_version_stays() -> None:
    engine = RecordingEngine(fail_on="b")
    sync_weights(Exporter(["a"]), engine, 1)
    with pytest.raises(KeyError, match="no weight b"):
        sync_weights(Exporter(["a", "b", "c"]), engine, 2)
    assert engine.events[-1] == ("abort",) and engine.weight_version == 1
    engine.fail_on = None
    sync_weights(Exporter(["a", "b"]), engine, 2)  # a later session starts over
    assert engine.weight_version == 2


def test_the_session_state_refuses_misuse_with_the_fix() -> None:
    session = WeightSession("e")
    with pytest.raises(WeightSyncError, match=r"outside a weight-sync session; call begin_weight_update\(version\)"):
        session.bucket()
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(WeightSyncError, match="non-negative integer"):
            session.begin(bad)  # type: ignore[arg-type]
    session.begin(1)
    with pytest.raises(WeightSyncError, match="version 1 is still open"):
        session.begin(2)
    session.abort()
    assert session.version is None and session.pending is None


def test_buckets_keep_order_and_stay_under_the_limit_unless_one_tensor_is_larger() -> None:
    named = [("a", torch.zeros(1)), ("b", torch.zeros(2)), ("big", torch.zeros(10)), ("c", torch.zeros(1))]
    buckets = list(iter_buckets(named, 12))  # float32: 4, 8, 40, 4 bytes
    assert [[n for n, _ in b] for b in buckets] == [["a", "b"], ["big"], ["c"]]
    with pytest.raises(ValueError, match="bucket_bytes must be >= 1"):
        list(iter_buckets(named, 0))
