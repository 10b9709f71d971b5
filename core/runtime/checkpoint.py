"""Run checkpoints: everything needed to continue a run as if it had never stopped.

Layout (one directory per checkpoint, named by the number of completed iterations)::

    <run_dir>/checkpoints/iter_000025/
        trainer/          TrainerBackend.save(): model, optimizer, trainer RNG
        sampler.json      Sampler.state_dict()
        rng.json          python, numpy and torch (CPU + CUDA) global RNG states
        state.json        the iteration counter and every registered component's JSON state
        COMPLETE          written last; a directory without it is ignored

A checkpoint is written into a hidden temporary directory and renamed into
place only once it is complete, so a run killed while saving leaves either
the previous checkpoints or the new one, never half of one. Only the newest
``keep`` complete checkpoints are kept.
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np
import structlog

from core.errors import CheckpointError, DiskFull

if TYPE_CHECKING:
    from core.interfaces import Sampler, TrainerBackend

log = structlog.get_logger(__name__)

FORMAT_VERSION = 1
COMPLETE_MARKER = "COMPLETE"
_NAME = re.compile(r"^iter_(\d{6,})$")


def checkpoint_dir(run_dir: Path | str) -> Path:
    return Path(run_dir) / "checkpoints"


def checkpoint_name(iteration: int) -> str:
    return f"iter_{iteration:06d}"


def iteration_of(path: Path) -> int | None:
    match = _NAME.match(path.name)
    return int(match.group(1)) if match else None


def list_complete(run_dir: Path | str) -> list[Path]:
    """Complete checkpoints, oldest first. Incomplete ones are skipped with a warning."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return []
    found: list[tuple[int, Path]] = []
    for path in root.iterdir():
        iteration = iteration_of(path)
        if iteration is None or not path.is_dir():
            continue
        if not (path / COMPLETE_MARKER).is_file():
            log.warning("ignoring incomplete checkpoint (no COMPLETE marker)", path=str(path))
            continue
        found.append((iteration, path))
    return [p for _, p in sorted(found)]


def latest_complete(run_dir: Path | str) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    complete = list_complete(run_dir)
    return complete[-1] if complete else None


def resolve_checkpoint(path: str | Path, *, what: str) -> Path:
    """A complete checkpoint directory from ``path``: the checkpoint itself, or a run directory (its newest)."""
    given = Path(path).expanduser()
    if (given / COMPLETE_MARKER).is_file():
        return given
    if given.is_dir():
        newest = latest_complete(given)
        if newest is not None:
            return newest
    raise CheckpointError(f"{what}: {given} is neither a complete checkpoint (a directory with a {COMPLETE_MARKER} "
                          "marker, e.g. <run>/checkpoints/iter_000100) nor a run directory holding one")


# ---------------------------------------------------------------------------
# Global RNG states
# ---------------------------------------------------------------------------


def capture_rng() -> dict[str, Any]:
    """Python, numpy and torch global RNG states as JSON-serializable data."""
    import torch

    version, internal, gauss = random.getstate()
    np_state = np.random.get_state(legacy=True)
    assert isinstance(np_state, tuple)
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "torch": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode("ascii"),
        "cuda": [],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = [base64.b64encode(s.numpy().tobytes()).decode("ascii") for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng(state: Mapping[str, Any]) -> None:
    import torch

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))

    def _tensor(encoded: str) -> Any:
        return torch.frombuffer(bytearray(base64.b64decode(encoded)), dtype=torch.uint8).clone()

    torch.set_rng_state(_tensor(state["torch"]))
    cuda = state.get("cuda") or []
    if cuda:
        if torch.cuda.is_available() and torch.cuda.device_count() >= len(cuda):
            torch.cuda.set_rng_state_all([_tensor(s) for s in cuda])
        else:
            log.warning("checkpoint holds CUDA RNG states but this process has fewer GPUs; not restored",
                        saved_devices=len(cuda))


# ---------------------------------------------------------------------------
# The manager
# ---------------------------------------------------------------------------


@dataclass
class _Registered:
    get_state: Callable[[], Any]
    set_state: Callable[[Any], None]


@dataclass
class Restored:
    """What :meth:`CheckpointManager.load` brought back."""

    path: Path
    iteration: int
    components: dict[str, Any] = field(default_factory=dict)


class CheckpointManager:
    """Saves and restores run checkpoints under ``<run_dir>/checkpoints``.

    The loop registers its own resumable pieces (counters, synthesis queues,
    metric accumulators) with :meth:`register`; their state must be JSON data.
    ``iteration`` always counts *completed* iterations, so a run resumed from
    ``iter_000025`` continues with iteration index 25 (0-based).
    """

    def __init__(self, run_dir: Path | str, *, keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1 (how many checkpoints to keep), got {keep}")
        self.run_dir = Path(run_dir)
        self.root = checkpoint_dir(run_dir)
        self.keep = keep
        self._registered: dict[str, _Registered] = {}

    def register(self, name: str, get_state: Callable[[], Any], set_state: Callable[[Any], None]) -> None:
        """Include a component's JSON state in every checkpoint, and give it back on load."""
        if name in self._registered:
            raise ValueError(f"checkpoint component {name!r} is registered twice")
        self._registered[name] = _Registered(get_state, set_state)

    # -- saving ---------------------------------------------------------------

    def save(self, iteration: int, *, trainer: TrainerBackend | None = None, sampler: Sampler | None = None) -> Path:
        """Write checkpoint ``iter_{iteration:06d}`` atomically; prune old ones; return its path."""
        if iteration < 0:
            raise ValueError(f"iteration must be >= 0, got {iteration}")
        started = time.perf_counter()
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / checkpoint_name(iteration)
        tmp = self.root / f".tmp-{final.name}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        try:
            if trainer is not None:
                trainer.save(tmp / "trainer")
            if sampler is not None:
                _write_json(tmp / "sampler.json", sampler.state_dict())
            _write_json(tmp / "rng.json", capture_rng())
            components = {name: reg.get_state() for name, reg in self._registered.items()}
            _write_json(tmp / "state.json", {
                "format": FORMAT_VERSION,
                "iteration": iteration,
                "has_trainer": trainer is not None,
                "has_sampler": sampler is not None,
                "components": components,
            })
            _write_json(tmp / COMPLETE_MARKER, {"iteration": iteration, "saved_at": time.time()})
            _fsync_tree(tmp)
            if final.exists():  # re-saving the same iteration (e.g. after a resume): replace it
                old = self.root / f".old-{final.name}-{os.getpid()}"
                os.rename(final, old)
                os.rename(tmp, final)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, final)
            _fsync_dir(self.root)
        except BaseException as exc:
            full = DiskFull.of(exc, final)  # a clear error naming the path and the free space at the failure
            shutil.rmtree(tmp, ignore_errors=True)
            if full is not None and full is not exc:
                raise full from exc
            raise
        self._prune()
        log.info("checkpoint saved", path=str(final), iteration=iteration,
                 seconds=round(time.perf_counter() - started, 3))
        return final

    def _prune(self) -> None:
        complete = list_complete(self.run_dir)
        for path in complete[: max(0, len(complete) - self.keep)]:
            shutil.rmtree(path, ignore_errors=True)
        # leftovers of saves killed half-way (other pids) are garbage
        for path in self.root.glob(".tmp-iter_*"):
            if not path.name.endswith(f"-{os.getpid()}"):
                shutil.rmtree(path, ignore_errors=True)

    # -- loading --------------------------------------------------------------

    def latest(self) -> Path | None:
        return latest_complete(self.run_dir)

    def load(
        self,
        path: Path | str | None = None,
        *,
        trainer: TrainerBackend | None = None,
        sampler: Sampler | None = None,
    ) -> Restored:
        """Restore trainer, sampler, global RNGs and registered components from ``path`` (default: latest)."""
        ckpt = Path(path) if path is not None else self.latest()
        if ckpt is None:
            raise CheckpointError(f"no complete checkpoint under {self.root}; start a new run instead of resuming")
        if not (ckpt / COMPLETE_MARKER).is_file():
            raise CheckpointError(f"checkpoint {ckpt} is incomplete (no {COMPLETE_MARKER} marker); "
                                  "resume from an earlier one or start a new run")
        state = _read_json(ckpt / "state.json")
        if state.get("format") != FORMAT_VERSION:
            raise CheckpointError(f"checkpoint {ckpt} has format {state.get('format')!r}; this version reads "
                                  f"format {FORMAT_VERSION}")
        if trainer is not None:
            if not state.get("has_trainer"):
                raise CheckpointError(f"checkpoint {ckpt} holds no trainer state")
            trainer.load(ckpt / "trainer")
        if sampler is not None:
            if not state.get("has_sampler"):
                raise CheckpointError(f"checkpoint {ckpt} holds no sampler state")
            sampler.load_state_dict(_read_json(ckpt / "sampler.json"))
        components = state.get("components", {})
        missing = sorted(set(self._registered) - set(components))
        if missing:
            raise CheckpointError(f"checkpoint {ckpt} lacks state for registered components: {', '.join(missing)}")
        for name, reg in self._registered.items():
            reg.set_state(components[name])
        # last, so nothing above (model loading draws random numbers) disturbs the restored streams
        restore_rng(_read_json(ckpt / "rng.json"))
        log.info("checkpoint restored", path=str(ckpt), iteration=state["iteration"])
        return Restored(path=ckpt, iteration=int(state["iteration"]), components=components)


def _write_json(path: Path, payload: Any) -> None:
    try:
        text = json.dumps(payload, sort_keys=True, allow_nan=True)
    except TypeError as exc:
        raise CheckpointError(f"{path.name}: state is not JSON-serializable: {exc}") from None
    path.write_text(text + "\n", encoding="utf-8")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint file {path} is missing") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"checkpoint file {path} is corrupt: {exc}") from None


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as fh:
                os.fsync(fh.fileno())
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
