"""What every built-in sampler shares: the task pool, the RNG, validation and state plumbing.

Tasks are held as positions ``0..N-1`` in the order given to ``setup``; per-task
numbers live in numpy arrays indexed by position, so selection over a million
tasks is a handful of vectorized passes, never a Python loop over tasks.

Behaviour common to all samplers (tested in ``tests/samplers``):

* ``setup`` rejects an empty pool and duplicate task ids.
* ``select`` with a batch larger than the selectable pool returns every
  selectable task once (a smaller batch, logged as a warning): the run keeps
  going on a tiny pool, and the ids are still distinct.
* ``observe`` rejects task ids that were not in the pool given to ``setup``
  (:class:`UnknownTaskError`) and values outside [0, 1] (successes, not
  rewards); a task with an empty outcome list carries no information and is
  skipped.
* ``state_dict`` is plain JSON (the RNG's 128-bit words as hex strings, arrays
  as base64 of little-endian bytes) and remembers a fingerprint of the pool;
  ``load_state_dict`` refuses state from another sampler kind or pool.
"""

from __future__ import annotations

import base64
import hashlib
import math
from typing import Any, Mapping, Sequence

import numpy as np
import structlog

from core.errors import CheckpointError, ScaleCUAError
from core.interfaces import Sampler
from core.types import Task

log = structlog.get_logger(__name__)

STATE_VERSION = 1
#: how many offending ids an error message lists
_SHOW = 5


class SamplerError(ScaleCUAError):
    """A sampler was given input it cannot use; the message says what and how to fix it."""


class UnknownTaskError(SamplerError, LookupError):
    """A task id that is not part of the pool the sampler was set up with."""


def _listing(items: Sequence[str]) -> str:
    shown = ", ".join(repr(i) for i in items[:_SHOW])
    more = f" and {len(items) - _SHOW} more" if len(items) > _SHOW else ""
    return shown + more


def encode_array(array: np.ndarray) -> dict[str, Any]:
    """A numpy array as JSON: dtype, length and base64 of its little-endian bytes (exact round trip)."""
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return {"dtype": array.dtype.str.lstrip("<>|="), "length": int(array.size),
            "base64": base64.b64encode(np.ascontiguousarray(little).tobytes()).decode("ascii")}


def decode_array(data: Mapping[str, Any], *, expected_length: int, what: str) -> np.ndarray:
    dtype = np.dtype(data["dtype"]).newbyteorder("<")
    array = np.frombuffer(base64.b64decode(data["base64"]), dtype=dtype)
    if array.size != expected_length or int(data.get("length", -1)) != expected_length:
        raise CheckpointError(f"sampler state: '{what}' holds {array.size} values for a pool of {expected_length} tasks")
    return array.astype(dtype.newbyteorder("="), copy=True)


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """The PCG64 state with its 128-bit integers as hex strings (JSON writers without big ints are fine)."""
    raw = rng.bit_generator.state
    inner = raw["state"]
    return {"bit_generator": raw["bit_generator"], "state": hex(inner["state"]), "inc": hex(inner["inc"]),
            "has_uint32": int(raw["has_uint32"]), "uinteger": int(raw["uinteger"])}


def restore_rng(data: Mapping[str, Any]) -> np.random.Generator:
    if data.get("bit_generator") != "PCG64":
        raise CheckpointError(f"sampler state: RNG {data.get('bit_generator')!r} is not PCG64")
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(data["state"], 16), "inc": int(data["inc"], 16)},
        "has_uint32": int(data["has_uint32"]),
        "uinteger": int(data["uinteger"]),
    }
    return rng


def pool_fingerprint(task_ids: Sequence[str]) -> str:
    """sha256 of the ids in pool order (NUL-separated: ids are names, never contain NUL)."""
    return hashlib.sha256("\0".join(task_ids).encode("utf-8")).hexdigest()


def round_half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


class PoolSampler(Sampler):
    """Base class: a pool of tasks by position, a seeded PCG64 generator, shared checks."""

    #: the registered name; written into the state so state from another kind is refused
    kind: str = "pool"

    def __init__(self) -> None:
        self._task_ids: list[str] = []
        self._index: dict[str, int] = {}
        self._rng: np.random.Generator | None = None
        self._seed = 0
        self._fingerprint = ""
        # selectable tasks (the frontier's initial-pass filter turns some off)
        self._active = np.zeros(0, dtype=bool)

    # -- setup -------------------------------------------------------------------

    def setup(self, tasks: Sequence[Task], *, seed: int) -> None:
        if len(tasks) == 0:
            raise SamplerError(f"{self.kind} sampler: the task pool is empty; point tasks.paths at task JSON files "
                               "or directories that hold at least one task")
        task_ids = [task.id for task in tasks]
        index = dict(zip(task_ids, range(len(task_ids))))
        if len(index) != len(task_ids):
            seen: set[str] = set()
            duplicates = sorted({t for t in task_ids if t in seen or seen.add(t)})
            raise SamplerError(f"{self.kind} sampler: task ids must be unique; duplicated: {_listing(duplicates)}. "
                               "Give each task file its own 'id'")
        self._task_ids = task_ids
        self._index = index
        self._seed = int(seed)
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        self._fingerprint = pool_fingerprint(task_ids)
        self._active = np.ones(len(task_ids), dtype=bool)
        self._setup_pool(tasks)

    def _setup_pool(self, tasks: Sequence[Task]) -> None:
        """Hook for subclasses: per-task arrays from the tasks (the base state is ready)."""

    @property
    def num_tasks(self) -> int:
        return len(self._task_ids)

    @property
    def rng(self) -> np.random.Generator:
        if self._rng is None:
            raise SamplerError(f"{self.kind} sampler: call setup(tasks, seed=...) before using it")
        return self._rng

    def _require_setup(self) -> None:
        if self._rng is None:
            raise SamplerError(f"{self.kind} sampler: call setup(tasks, seed=...) before using it")

    # -- helpers for subclasses ----------------------------------------------------

    def _ids(self, positions: np.ndarray | Sequence[int]) -> list[str]:
        ids = self._task_ids
        return [ids[p] for p in np.asarray(positions, dtype=np.int64).tolist()]

    def _positions(self, task_ids: Sequence[str], *, where: str) -> np.ndarray:
        """Positions of ``task_ids``; :class:`UnknownTaskError` names every id not in the pool."""
        index = self._index
        try:
            return np.fromiter(map(index.__getitem__, task_ids), dtype=np.int64, count=len(task_ids))
        except KeyError:
            unknown = [t for t in task_ids if t not in index]
            raise UnknownTaskError(
                f"{self.kind} sampler.{where}: {len(unknown)} task id(s) not in the pool given to setup(): "
                f"{_listing(unknown)}. Only ids of the {self.num_tasks} tasks passed to setup() can be reported"
            ) from None

    def _batch_size(self, batch_size: int, available: int) -> int:
        """The batch actually drawn: ``batch_size`` capped at the selectable pool (documented above)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise SamplerError(f"{self.kind} sampler: batch_size must be a positive integer, got {batch_size!r}")
        if available == 0:
            raise SamplerError(f"{self.kind} sampler: no selectable tasks are left in the pool of {self.num_tasks}")
        if batch_size > available:
            log.warning("batch larger than the selectable pool; selecting every task once",
                        sampler=self.kind, batch_size=int(batch_size), selectable=int(available))
            return int(available)
        return int(batch_size)

    def _validated_outcomes(self, outcomes: Mapping[str, Sequence[float]], *, where: str) -> tuple[np.ndarray, np.ndarray]:
        """(positions, mean success) of the non-empty outcome lists; raises on unknown ids or bad values."""
        task_ids = list(outcomes)
        positions = self._positions(task_ids, where=where)
        keep, means = [], []
        for k, task_id in enumerate(task_ids):
            values = np.asarray(list(outcomes[task_id]), dtype=np.float64)
            if values.size == 0:
                log.warning("task reported with no outcomes; ignored", sampler=self.kind, task_id=task_id)
                continue
            if not np.all(np.isfinite(values)) or values.min() < 0.0 or values.max() > 1.0:
                raise SamplerError(
                    f"{self.kind} sampler.{where}: task {task_id!r} has outcomes {values.tolist()}; each rollout's "
                    "outcome must be its success in [0, 1] (1 = solved), not a reward with penalties")
            keep.append(k)
            means.append(float(values.mean()))
        return positions[keep], np.asarray(means, dtype=np.float64)

    def _selectable(self) -> np.ndarray:
        """Positions of the tasks that may be selected."""
        return np.flatnonzero(self._active)

    def _uniform_from(self, candidates: np.ndarray, count: int) -> np.ndarray:
        """``count`` distinct positions drawn uniformly from ``candidates``."""
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        return candidates[self.rng.choice(candidates.size, size=count, replace=False)]

    # -- common defaults -------------------------------------------------------------

    def observe(self, iteration: int, outcomes: Mapping[str, Sequence[float]]) -> None:
        """Samplers that do not learn still validate what they are told."""
        self._require_setup()
        self._validated_outcomes(outcomes, where="observe")

    def set_initial_pass_rates(self, pass_rates: Mapping[str, float]) -> None:
        """Validated (known ids, rates in [0, 1]); samplers that use them override :meth:`_use_initial_rates`."""
        self._require_setup()
        positions = self._positions(list(pass_rates), where="set_initial_pass_rates")
        rates = np.fromiter(pass_rates.values(), dtype=np.float64, count=len(pass_rates))
        bad = ~np.isfinite(rates) | (rates < 0) | (rates > 1)
        if bad.any():
            first = list(pass_rates)[int(np.flatnonzero(bad)[0])]
            raise SamplerError(f"{self.kind} sampler.set_initial_pass_rates: task {first!r} has pass rate "
                               f"{pass_rates[first]!r}; pass rates are fractions in [0, 1]")
        self._use_initial_rates(positions, rates)

    def _use_initial_rates(self, positions: np.ndarray, rates: np.ndarray) -> None:
        """Hook: samplers that do not use an initial pass ignore the rates."""

    def accept(self, task_id: str, rewards: Sequence[float]) -> bool:
        self._require_setup()
        self._positions([task_id], where="accept")
        return True

    def stats(self) -> dict[str, float]:
        """Scalar counters for the loop's metrics (``sampler/<key>``)."""
        return {"selectable_tasks": float(self._active.sum())}

    # -- state ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        self._require_setup()
        return {"kind": self.kind, "version": STATE_VERSION, "num_tasks": self.num_tasks,
                "pool_sha256": self._fingerprint, "seed": str(self._seed), "rng": rng_state(self.rng),
                "active": encode_array(self._active), **self._extra_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self._rng is None:
            raise SamplerError(f"{self.kind} sampler: call setup(tasks, seed=...) before load_state_dict()")
        if state.get("kind") != self.kind:
            raise CheckpointError(f"sampler state was saved by the '{state.get('kind')}' sampler, but this run uses "
                                  f"'{self.kind}'; resume with the sampler the run was started with")
        if state.get("version") != STATE_VERSION:
            raise CheckpointError(f"{self.kind} sampler state has version {state.get('version')!r}; "
                                  f"this version reads {STATE_VERSION}")
        if state.get("num_tasks") != self.num_tasks or state.get("pool_sha256") != self._fingerprint:
            raise CheckpointError(
                f"{self.kind} sampler state was saved for a pool of {state.get('num_tasks')} tasks that differs from "
                f"the {self.num_tasks} tasks loaded now (ids or order changed); resume with the same tasks.paths")
        before = dict(self.__dict__)  # arrays are replaced, never mutated: a shallow copy can undo a failed load
        try:
            self._seed = int(state["seed"])
            self._rng = restore_rng(state["rng"])
            self._active = decode_array(state["active"], expected_length=self.num_tasks, what="active").astype(bool)
            self._load_extra_state(state)
        except (KeyError, TypeError, ValueError) as exc:
            self.__dict__.update(before)
            raise CheckpointError(f"{self.kind} sampler state is incomplete or malformed ({type(exc).__name__}: "
                                  f"{exc}); the checkpoint's sampler.json may be damaged") from exc
        except CheckpointError:
            self.__dict__.update(before)
            raise

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        return None
