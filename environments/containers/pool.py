"""A warm pool of containers: pre-booted desktops handed to episodes, recycled, replaced when dead.

Each :class:`Slot` is one running container whose desktop answered its
readiness check. The pool never holds more than ``capacity`` live containers
(the memory bound users size it by): a container counts from the request that
creates it until the engine confirms its removal, so booting and
being-removed containers count too; only containers the engine reported
stopped do not. Within that bound it keeps ``warm`` booted, idle slots beside
those in use (booting at most ``max_parallel_starts`` at once, so a 2-core
machine is not swamped by cold starts) and spreads containers over its
engines by load.

A health check runs every ``health_interval_s``: one list request per engine
finds containers that stopped (killed, crashed, OOM) and a probe request per
idle slot finds desktops that stopped answering; both are removed and
replaced. A slot in use that died is marked ``dead`` (its ``died`` event
wakes the episode, which fails and gives it back) and replaced right away;
its container is removed only then, so its address cannot pass to a new
container while the episode might still send to it.

Starts that fail are retried with backoff; after ``max_start_failures`` in a
row, waiting episodes get the error instead of waiting forever (a missing
image or a broken engine does not hang a training run).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from core.errors import EnvironmentFailure
from environments.client import EnvironmentClient, ProbeError
from environments.containers.engine import Engine, EngineError

log = structlog.get_logger(__name__)

#: engine states of a container that holds no memory any more (None: the engine no longer lists it)
STOPPED_STATES = frozenset({None, "exited", "dead", "stopped"})


@dataclass(eq=False)
class Slot:
    """One running container with a ready desktop."""

    name: str
    container_id: str
    engine: Engine
    client: EnvironmentClient
    url: str
    #: what the container's session announced (display, pids), when it prints a ready line
    info: dict[str, Any] = field(default_factory=dict)
    screen_size: tuple[int, int] | None = None
    ready_s: float = 0.0
    #: episodes started (resets) in this container
    episodes: int = 0
    #: something ran in it since it booted (a later reset has to clean up)
    dirty: bool = False
    dead: bool = False
    #: the engine reported the container stopped or gone (it no longer counts against the capacity)
    stopped: bool = False
    removed: bool = False
    #: set when the health check finds the container dead (episodes holding the slot stop waiting on it)
    died: asyncio.Event = field(default_factory=asyncio.Event)


#: boots one container named ``name`` on ``engine`` and returns it ready; removes it itself on failure
Launcher = Callable[[Engine, str], Awaitable[Slot]]


class PoolClosed(EnvironmentFailure):
    pass


class WarmPool:
    def __init__(
        self,
        engines: list[Engine],
        launch: Launcher,
        *,
        name_prefix: str,
        capacity: int,
        warm: int,
        health_interval_s: float = 5.0,
        max_parallel_starts: int = 2,
        max_start_failures: int = 3,
    ):
        if not engines:
            raise ValueError("a pool needs at least one engine")
        self.engines = engines
        self._launch = launch
        self.name_prefix = name_prefix
        if capacity < 1:
            raise ValueError("a pool needs a capacity of at least one container")
        self.capacity = capacity
        self.warm = warm
        self.health_interval_s = health_interval_s
        self.max_parallel_starts = max_parallel_starts
        self.max_start_failures = max_start_failures
        self._idle: collections.deque[Slot] = collections.deque()
        self._in_use: set[Slot] = set()
        self._booting: collections.Counter[Engine] = collections.Counter()
        #: containers whose removal was decided but not yet confirmed by the engine (still live until then)
        self._removing: collections.Counter[Engine] = collections.Counter()
        self._waiters = 0
        self._counter = itertools.count(1)
        self._failures_in_a_row = 0
        self._last_error: str | None = None
        self._recent_errors: list[str] = []  # of the failures in a row (a later one may lack an earlier's log)
        self._backoff_until = 0.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._health_task: asyncio.Task[None] | None = None
        self._cond: asyncio.Condition | None = None
        self.closed = False
        self.stats: dict[str, Any] = {"started": 0, "failed_starts": 0, "destroyed": 0, "recycled": 0,
                                      "reused": 0, "replaced_dead": 0, "ready_s": [], "peak_alive": 0}

    # -- accounting ------------------------------------------------------------

    def _alive_on(self, engine: Engine) -> int:
        """Containers on ``engine`` that count against the capacity: booting, idle, in use, being removed."""
        live = sum(1 for s in itertools.chain(self._idle, self._in_use) if s.engine is engine and not s.stopped)
        return live + self._booting[engine] + self._removing[engine]

    def _capacity_left(self, engine: Engine) -> bool:
        cap = engine.host.max_containers
        return cap is None or self._alive_on(engine) < cap

    @property
    def alive(self) -> int:
        return sum(self._alive_on(e) for e in self.engines)

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def in_use(self) -> int:
        return len(self._in_use)

    @property
    def booting(self) -> int:
        return sum(self._booting.values())

    @property
    def removing(self) -> int:
        return sum(self._removing.values())

    def _warm_target(self) -> int:
        """Idle slots to keep: ``warm``, as far as the capacity left beside the slots in use allows."""
        in_use = sum(1 for s in self._in_use if not s.stopped)
        return max(0, min(self.warm, self.capacity - in_use))

    def _note_peak(self) -> None:
        self.stats["peak_alive"] = max(self.stats["peak_alive"], self.alive)

    def slots(self) -> list[Slot]:
        return [*self._idle, *self._in_use]

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Begin booting the warm containers and the health checks (inside the running loop)."""
        if self._cond is None:
            self._cond = asyncio.Condition()
            self._health_task = asyncio.create_task(self._health_loop(), name=f"{self.name_prefix}-health")
            self._top_up()

    @property
    def cond(self) -> asyncio.Condition:
        self.start()
        assert self._cond is not None
        return self._cond

    async def wait_warm(self, timeout_s: float) -> None:
        """Wait until ``warm`` containers are booted and idle (fewer when the slots in use leave less capacity)."""
        deadline = time.monotonic() + timeout_s
        async with self.cond:
            while self.idle < self._warm_target():
                self._raise_if_failing()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise EnvironmentFailure(
                        f"{self.name_prefix}: only {self.idle} of {self._warm_target()} warm containers ready after "
                        f"{timeout_s:g} s (last error: {self._last_error})"
                    )
                try:
                    await asyncio.wait_for(self.cond.wait(), remaining)
                except TimeoutError:
                    pass

    async def take(self) -> Slot:
        """A ready slot (booting one if none is idle); waits while ``capacity`` are handed out."""
        async with self.cond:
            self._waiters += 1
            try:
                while True:
                    if self.closed:
                        raise PoolClosed(f"{self.name_prefix}: the pool is closed")
                    if self._idle and len(self._in_use) < self.capacity:
                        slot = self._idle.popleft()
                        self._in_use.add(slot)
                        return slot
                    self._raise_if_failing()
                    self._top_up()
                    await self.cond.wait()
            finally:
                self._waiters -= 1
                self._top_up()

    async def give_back(self, slot: Slot, *, reuse: bool) -> None:
        """Return a slot: back to the idle list (``reuse``) or removed, with a replacement booting."""
        async with self.cond:
            self._in_use.discard(slot)
            if reuse and not slot.dead and not self.closed:
                self._idle.append(slot)
                self.stats["reused"] += 1
            else:
                self.stats["recycled"] += 1
                self._retire(slot)
            self._top_up()
            self.cond.notify_all()

    async def close(self) -> None:
        """Remove every container of this pool (booting ones too) and stop the health checks."""
        if self._cond is None:
            self.closed = True
            await asyncio.gather(*(asyncio.to_thread(self._remove_labelled, e) for e in self.engines))
            return
        async with self.cond:
            self.closed = True
            slots, self._idle, self._in_use = self.slots(), collections.deque(), set()
            self.cond.notify_all()
        if self._health_task is not None:
            self._health_task.cancel()
        await asyncio.gather(*(self._destroy(s) for s in slots), return_exceptions=True)
        pending = [t for t in self._tasks if not t.done()]
        await asyncio.gather(*pending, return_exceptions=True)  # boots finish and remove what they made
        # whatever a cancelled or racing start left: every container with this pool's label goes
        await asyncio.gather(*(asyncio.to_thread(self._remove_labelled, e) for e in self.engines))
        if self._health_task is not None:
            await asyncio.gather(self._health_task, return_exceptions=True)

    def _remove_labelled(self, engine: Engine) -> None:
        from environments.containers.engine import LABEL_POOL

        try:
            for container_id in engine.states({LABEL_POOL: self.name_prefix}):
                engine.remove(container_id)
        except (EngineError, OSError) as exc:
            log.warning("pool cleanup failed", engine=engine.url, error=str(exc))
        except Exception as exc:  # noqa: BLE001 (docker SDK errors: the engine went away)
            log.warning("pool cleanup failed", engine=engine.url, error=str(exc))

    def remove_all_sync(self) -> None:
        """Last resort at interpreter exit (no loop): remove this pool's containers."""
        for engine in self.engines:
            self._remove_labelled(engine)

    # -- booting ---------------------------------------------------------------

    def _raise_if_failing(self) -> None:
        if self._failures_in_a_row >= self.max_start_failures and not self._idle and not self.booting:
            earlier = [e for e in self._recent_errors[:-1] if e != self._last_error]
            raise EnvironmentFailure(
                f"{self.name_prefix}: {self._failures_in_a_row} container starts failed in a row; "
                f"last error: {self._last_error}"
                + (f"; earlier: {' | '.join(earlier[-3:])}" if earlier else "")
            )

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _top_up(self) -> None:
        """Boot containers until idle + booting covers ``warm`` plus whoever waits, never beyond the capacity
        (caller holds the lock)."""
        if self.closed or self._cond is None:
            return
        now = time.monotonic()
        if now < self._backoff_until:
            return
        in_use = sum(1 for s in self._in_use if not s.dead)
        want = self.warm + max(0, min(self._waiters, self.capacity - in_use))
        while (self.idle + self.booting < want and self.alive < self.capacity
               and self.booting < self.max_parallel_starts):
            engines = [e for e in self.engines if self._capacity_left(e)]
            if not engines:
                return
            engine = min(engines, key=self._alive_on)
            self._booting[engine] += 1
            self._note_peak()
            self._spawn(self._boot(engine, f"{self.name_prefix}-{next(self._counter)}"))

    def _retire(self, slot: Slot) -> None:
        """Remove ``slot``'s container in the background; it counts against the capacity until the engine confirms
        the removal, unless it already stopped (caller holds the lock)."""
        if not slot.stopped:
            self._removing[slot.engine] += 1
        self._spawn(self._destroy(slot, counted=not slot.stopped))

    async def _boot(self, engine: Engine, name: str) -> None:
        started = time.monotonic()
        try:
            slot = await self._launch(engine, name)
        except asyncio.CancelledError:
            async with self.cond:
                self._booting[engine] -= 1
            raise
        except Exception as exc:  # noqa: BLE001 (any start failure is retried; the message is kept)
            async with self.cond:
                self._booting[engine] -= 1
                if self.closed:
                    return  # cut short by close(): not a failure
                self._failures_in_a_row += 1
                self._last_error = f"{type(exc).__name__}: {exc}"
                self._recent_errors = [*self._recent_errors[-3:], self._last_error]
                self.stats["failed_starts"] += 1
                delay = min(30.0, 0.5 * 2 ** min(self._failures_in_a_row, 6))
                self._backoff_until = time.monotonic() + delay
                log.warning("container start failed", pool=self.name_prefix, engine=engine.url, container=name,
                            error=self._last_error, retry_in_s=delay)
                asyncio.get_running_loop().call_later(delay, self._kick)
                self.cond.notify_all()
            return
        slot.ready_s = time.monotonic() - started
        async with self.cond:
            self._booting[engine] -= 1
            self._failures_in_a_row = 0
            self._recent_errors = []
            self.stats["started"] += 1
            self.stats["ready_s"].append(round(slot.ready_s, 3))
            if self.closed:
                self._retire(slot)
                return
            self._idle.append(slot)
            log.info("container ready", pool=self.name_prefix, container=name, engine=engine.url,
                     ready_s=round(slot.ready_s, 2))
            self._top_up()
            self.cond.notify_all()

    def _kick(self) -> None:
        if not self.closed:
            self._spawn(self._kick_locked())

    async def _kick_locked(self) -> None:
        async with self.cond:
            self._top_up()

    async def _destroy(self, slot: Slot, *, counted: bool = False) -> None:
        """Close the slot's client and remove its container (once); ``counted``: :meth:`_retire` counted it as
        being removed, so the capacity it frees is given back (and used) here."""
        slot.dead = True
        try:
            await slot.client.close()
            if slot.removed:
                return
            slot.removed = True
            await asyncio.to_thread(slot.engine.remove, slot.container_id)
            self.stats["destroyed"] += 1
        finally:
            if counted:
                await self._removed(slot.engine)

    async def _removed(self, engine: Engine) -> None:
        async with self.cond:
            self._removing[engine] -= 1
            self._top_up()
            self.cond.notify_all()

    # -- health ------------------------------------------------------------------

    async def _health_loop(self) -> None:
        while not self.closed:
            await asyncio.sleep(self.health_interval_s)
            try:
                await self.check_health()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 (an engine hiccup must not end the checks)
                log.warning("health check failed", pool=self.name_prefix, error=f"{type(exc).__name__}: {exc}")

    async def check_health(self) -> list[str]:
        """Find stopped containers and silent idle desktops; remove and replace them. Returns their names."""
        from environments.containers.engine import LABEL_POOL

        states: dict[str, str] = {}
        for engine in self.engines:
            states.update(await asyncio.to_thread(engine.states, {LABEL_POOL: self.name_prefix}))
        idle = list(self._idle)
        answers = await asyncio.gather(*(self._answers(s) for s in idle))
        silent = {s for s, ok in zip(idle, answers) if not ok}
        dead = []
        async with self.cond:
            for slot in self.slots():
                if slot.dead:
                    continue
                state = states.get(slot.container_id)
                if state != "running" or slot in silent:
                    slot.dead = True
                    slot.stopped = state in STOPPED_STATES
                    slot.died.set()
                    dead.append(slot)
                    self.stats["replaced_dead"] += 1
                    if slot in self._in_use:
                        # the episode holding it fails now and gives it back; the container stays until then
                        # so its address cannot pass to another container while a request may still use it
                        continue
                    self._idle.remove(slot)
                    self._retire(slot)
            if dead:
                log.warning("dead containers replaced", pool=self.name_prefix, containers=[s.name for s in dead])
                self._top_up()
                self.cond.notify_all()
        return [s.name for s in dead]

    @staticmethod
    async def _answers(slot: Slot) -> bool:
        try:
            await asyncio.wait_for(slot.client.screen_size(), 10)
            return True
        except (TimeoutError, ProbeError):
            return False
