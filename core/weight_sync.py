"""Weight sync as a session: begin(version) -> buckets -> commit, the same for every rollout engine.

The loop (and anyone else who moves trainer weights into an engine) calls :func:`sync_weights`; an engine
implements the three session methods of :class:`core.interfaces.RolloutEngine`. A version is an integer that
only increases: the number of training iterations (the RL loop) or optimizer steps (a warm start) the weights
reflect. Every generation reports the version it was sampled with (:attr:`core.interfaces.Generation.weight_version`),
so each turn of a trajectory says which policy produced it -- what an asynchronous pipeline needs to bound and
measure staleness.

:func:`iter_buckets` is the one rule that splits (name, tensor) pairs into buckets, used by every trainer's
``export_weights`` and by transports that need smaller pieces.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from core.errors import ScaleCUAError

__all__ = ["WeightSession", "WeightSyncError", "check_next_version", "iter_buckets", "sync_weights", "tensor_bytes"]


class WeightSyncError(ScaleCUAError):
    """A weight-sync session was used out of order (a bucket outside a session, a version that does not grow)."""


def tensor_bytes(tensor: Any) -> int:
    """Bytes of a torch tensor (or anything with ``numel()`` and ``element_size()``)."""
    return int(tensor.numel()) * int(tensor.element_size())


def iter_buckets(named: Iterable[tuple[str, Any]], bucket_bytes: int) -> Iterator[list[tuple[str, Any]]]:
    """Group (name, tensor) pairs into consecutive lists of at most ``bucket_bytes`` (a larger tensor travels
    alone); order is kept."""
    if bucket_bytes < 1:
        raise ValueError(f"bucket_bytes must be >= 1, got {bucket_bytes}")
    bucket: list[tuple[str, Any]] = []
    size = 0
    for name, tensor in named:
        nbytes = tensor_bytes(tensor)
        if bucket and size + nbytes > bucket_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.append((name, tensor))
        size += nbytes
    if bucket:
        yield bucket


def check_next_version(engine: str, current: int | None, version: int) -> None:
    """What every engine's ``begin_weight_update`` checks: ``version`` is an int above the current one."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise WeightSyncError(f"{engine}: a weight version is a non-negative integer, got {version!r}")
    if current is not None and version <= current:
        raise WeightSyncError(f"{engine}: weight version {version} does not follow the current version {current}; "
                              "versions only increase (the training iterations the weights reflect)")


class WeightSession:
    """The state every engine's session methods share: the committed version and the one being written.

    An engine keeps one, calls :meth:`begin` / :meth:`bucket` / :meth:`commit` / :meth:`abort` from its
    ``begin_weight_update`` / ``update_weights`` / ``commit_weight_update`` / ``abort_weight_update``, and
    answers ``weight_version`` with :attr:`version`. ``None``: the weights it was built with, never synced.
    """

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.version: int | None = None
        self.pending: int | None = None

    def begin(self, version: int) -> None:
        if self.pending is not None:
            raise WeightSyncError(f"{self.engine}: the weight update to version {self.pending} is still open; "
                                  "commit or abort it before beginning another")
        check_next_version(self.engine, self.version, version)
        self.pending = version

    def bucket(self) -> int:
        """The open session's version; an error outside a session."""
        if self.pending is None:
            raise WeightSyncError(f"{self.engine}: update_weights outside a weight-sync session; call "
                                  "begin_weight_update(version) first (core.weight_sync.sync_weights does it all)")
        return self.pending

    def commit(self) -> int:
        version = self.bucket()
        self.version, self.pending = version, None
        return version

    def abort(self) -> None:
        self.pending = None


def sync_weights(trainer: Any, engine: Any, version: int) -> int:
    """One session: the trainer's weights (``export_weights`` buckets) become ``engine``'s version ``version``.

    On any error the session is aborted (the engine keeps generating with the weights it had, or refuses to
    until a later session commits) and the error propagates. Returns the number of tensors sent.
    """
    engine.begin_weight_update(version)
    count = 0
    try:
        for bucket in trainer.export_weights():
            engine.update_weights(bucket)
            count += len(bucket)
    except BaseException:
        engine.abort_weight_update()
        raise
    engine.commit_weight_update()
    return count
