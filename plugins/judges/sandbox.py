"""The ``sandbox`` judge executor: generated judge code runs confined, one process per call, on this host.

Every call starts ``python -I -S sandbox_runner.py`` (see that module for how
the judge is confined), sends it the code and arguments as JSON on stdin and
reads one JSON report back. Metrics run with nothing of the host visible but
the Python installation and the artifact files they are given: strings in
``result``/``expected`` naming files under ``artifact_roots`` (by default the
evaluations' caches, ``<tmp>/scalecua-judge-*``, where built-in getters such
as ``vm_file`` put what they fetch) are bound read-only at the same path.
Getters run the same way with the environment's home directory bound
read-only as their cwd and HOME; this executor serves environments whose
desktop shares this host (``env.isolated`` False, ``env.home_dir`` set).

Isolation is detected once per interpreter at startup: without user, mount,
network and pid namespaces the executor refuses to start unless
``allow_unisolated`` is set (then judges still get rlimits, a scratch
directory, a clean environment and, as root, a throwaway uid, but no network
or filesystem isolation).

Read access to a local desktop's home: the judge runs as the home's owner
when the host is not root; as root it runs as a throwaway unprivileged uid
and can read what the home's permissions give "others" (files the desktop
writes with umask 022 are readable; 0700 directories are not).
"""

from __future__ import annotations

import asyncio
import fnmatch
import glob
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import structlog

from core.errors import EnvironmentFailure, ScaleCUAError
from core.interfaces import Environment, JudgeCall, JudgeExecutor
from core.types import JudgementStatus
from plugins.judges.options import SandboxOptions
from plugins.judges.results import call_from_report, finish_metric, log_outcome
from plugins.judges.validator import EntryPoint, validate_judge_code

log = structlog.get_logger(__name__)

RUNNER = Path(__file__).with_name("sandbox_runner.py")
#: seconds the supervisor may take beyond the judge's wall-clock limit (start-up, teardown)
SUPERVISOR_GRACE_S = 10.0
#: runs of the isolation probe before a probe killed by a signal each time counts as a failed probe
PROBE_ATTEMPTS = 3
SUPERVISOR_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
CRASHED = JudgementStatus.CRASHED.value
REJECTED = JudgementStatus.REJECTED.value


class SandboxUnavailable(ScaleCUAError):
    """This host cannot confine untrusted judges and the config does not allow running them unconfined."""

    exit_code = 2


@dataclass(frozen=True)
class IsolationSupport:
    namespaces: bool
    reason: str
    #: the interpreter's site-packages; calls run with ``-S`` (start-up is 3x faster) and add these themselves
    site_paths: tuple[str, ...] = ()


_support: dict[str, IsolationSupport] = {}


def detect_isolation(python: str) -> IsolationSupport:
    """Whether ``python`` can run a judge in fresh user/mount/net/pid namespaces here (cached)."""
    if python in _support:
        return _support[python]
    import subprocess

    for _attempt in range(PROBE_ATTEMPTS):
        try:
            done = subprocess.run([python, "-I", str(RUNNER), "--probe"], capture_output=True, timeout=60,
                                  env=SUPERVISOR_ENV, start_new_session=True)
        except (OSError, subprocess.SubprocessError) as exc:
            support = IsolationSupport(False, f"the isolation probe failed: {exc}")
            break
        if done.returncode < 0:  # killed from outside (OOM killer, an operator): says nothing about the host
            support = IsolationSupport(False, f"the isolation probe was killed by signal {-done.returncode} "
                                              f"{PROBE_ATTEMPTS} times")
            continue
        try:
            report = json.loads(done.stdout.decode().strip().splitlines()[-1])
            support = IsolationSupport(bool(report.get("ok")), str(report.get("error") or "namespaces work"),
                                       tuple(report.get("site_paths") or ()))
        except (ValueError, IndexError) as exc:
            tail = done.stderr.decode(errors="replace").strip()[-300:]
            support = IsolationSupport(False, f"the isolation probe failed (exit {done.returncode}, {exc!r}): "
                                              f"{tail or 'no output'}")
        break
    _support[python] = support
    return support


def _json_paths(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _json_paths(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _json_paths(item)


class HostSandbox:
    """Runs one judge function per call in a confined child process on this host."""

    def __init__(self, options: SandboxOptions):
        self.options = options
        self.python = options.python or sys.executable
        support = detect_isolation(self.python)
        self.site_paths = list(support.site_paths)
        if support.namespaces:
            self.isolation = "namespaces"
        elif options.allow_unisolated:
            self.isolation = "none"
            log.warning("judge sandbox runs WITHOUT namespace isolation (allow_unisolated)", reason=support.reason)
        else:
            raise SandboxUnavailable(
                f"judge sandbox: this host cannot confine untrusted judge code ({support.reason}). Run on a kernel "
                f"that allows unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                f"user.max_user_namespaces > 0; in a container: a seccomp/AppArmor profile that allows unshare), "
                f"or set judge.options.allow_unisolated: true to run judges without network and filesystem "
                f"isolation (unsafe)."
            )
        if options.artifact_roots is None:  # where evaluations cache the files built-in getters fetch
            roots = [os.path.join(os.path.realpath(tempfile.gettempdir()), "scalecua-judge-*")]
        else:
            roots = [r if glob.has_magic(r) else os.path.realpath(r) for r in options.artifact_roots]
        self.artifact_roots = roots
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self.options.max_concurrency)
        return semaphore

    def artifact_files(self, *values: Any) -> list[str]:
        """Strings in ``values`` naming existing files under the artifact roots (bound read-only for metrics)."""
        found: list[str] = []
        for text in (t for v in values for t in _json_paths(v)):
            if not text.startswith("/") or len(text) > 4096 or "\x00" in text or text in found:
                continue
            real = os.path.realpath(text)
            if real != os.path.normpath(text) or not os.path.isfile(real):
                continue  # symlinks and non-files are not artifacts
            ancestors = [str(p) for p in Path(real).parents]
            if any(fnmatch.fnmatchcase(a, root.rstrip("/")) for root in self.artifact_roots for a in ancestors):
                found.append(real)
        return found

    async def run(
        self,
        *,
        kind: str,
        code: str,
        function: str,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        home: Path | None = None,
        read_only: Sequence[str] = (),
    ) -> JudgeCall:
        """Run ``function(*args, **kwargs)`` from ``code``; the report becomes a :class:`JudgeCall`."""
        started = time.monotonic()
        request: dict[str, Any] = {
            "kind": kind,
            "code": code,
            "function": function,
            "args": list(args),
            "kwargs": dict(kwargs),
            "isolation": self.isolation,
            "limits": self.options.limits_for_runner(),
            "read_only": [str(p) for p in ([home] if home else [])] + list(read_only),
            "site_paths": self.site_paths,
        }
        if home is not None:
            request["home"] = str(home)
        try:
            json.dumps(request["args"], allow_nan=True)
        except (TypeError, ValueError) as exc:
            what = "artifact" if kind == "metric" else "getter config"
            return JudgeCall(CRASHED, None, f"the {what} passed to the judge is not JSON-serializable ({exc}); "
                                            f"getters must return JSON-serializable artifacts", 0.0)
        async with self._semaphore():
            workdir = tempfile.mkdtemp(prefix="scalecua-sandbox-", dir=self.options.work_dir)
            try:
                request["workdir"] = workdir
                if self.isolation == "none":
                    request["cwd"] = workdir
                report = await self._supervise(json.dumps(request, allow_nan=True).encode())
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
        return call_from_report(report, time.monotonic() - started)

    async def _supervise(self, payload: bytes) -> dict[str, Any]:
        proc = await asyncio.create_subprocess_exec(
            self.python, "-I", "-S", str(RUNNER),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, env=SUPERVISOR_ENV,
        )
        try:
            limit = float(self.options.wall_timeout_s) + SUPERVISOR_GRACE_S
            stdout, stderr = await asyncio.wait_for(proc.communicate(payload), timeout=limit)
        except asyncio.TimeoutError:
            return {"status": "sandbox_error", "error": "the sandbox supervisor did not answer in time"}
        finally:
            if proc.returncode is None:  # timed out or cancelled: take the whole sandbox down
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                await asyncio.shield(proc.wait())
        lines = stdout.decode("utf-8", "replace").strip().splitlines()
        try:
            report = json.loads(lines[-1])
        except (IndexError, ValueError):
            if proc.returncode is not None and proc.returncode < 0:
                # the supervisor itself died by a signal before it reported: the judge cannot reach it (it runs in
                # its own pid namespace), so something outside did (the OOM killer, an operator): no verdict
                # on the episode, which is retried on a fresh desktop like any infrastructure failure
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # whatever of its sandbox is left
                except ProcessLookupError:
                    pass
                raise JudgeWorkerLost(f"the judge sandbox's supervisor was killed by signal {-proc.returncode} "
                                      "before it reported; the episode is retried")
            tail = stderr.decode("utf-8", "replace")[-1500:]
            return {"status": "sandbox_error", "error": f"the sandbox supervisor failed (exit {proc.returncode}): {tail}"}
        return report if isinstance(report, dict) else {"status": "sandbox_error", "error": "malformed report"}


class JudgeWorkerLost(EnvironmentFailure):
    """The process judging an episode was killed from outside: the episode gets no score and is retried."""


class SandboxExecutor(JudgeExecutor):
    """Generated metrics and local-desktop getters in a confined process on this host."""

    name = "sandbox"

    def __init__(self, options: SandboxOptions | None = None, **_context: Any):
        self.options = options or SandboxOptions()
        self.sandbox = HostSandbox(self.options)

    def check(self, code: str, entry: EntryPoint) -> JudgeCall | None:
        """A ``rejected`` call when the rule validator refuses ``code`` (None when it may run)."""
        if not (isinstance(entry.name, str) and entry.name.isidentifier()):
            return JudgeCall(REJECTED, None, f"judge function name {entry.name!r} is not a Python identifier", 0.0)
        if not self.options.validate_code:
            return None
        report = validate_judge_code(code, [entry], allowed_imports=self.options.allowed_imports)
        return None if report.ok else JudgeCall(REJECTED, None, report.summary(), 0.0)

    async def run_metric(
        self,
        code: str,
        function: str,
        result: Any,
        expected: Any,
        options: Mapping[str, Any],
        *,
        task_id: str | None = None,
        validate: bool = True,
    ) -> JudgeCall:
        options = dict(options or {})
        bad_keys = [k for k in options if not isinstance(k, str) or not k.isidentifier()]
        entry = EntryPoint(function, "metric", tuple(options))
        if bad_keys:
            call = JudgeCall(CRASHED, None, f"metric options must have identifier keys, got {bad_keys!r}", 0.0)
        else:
            call = (self.check(code, entry) if validate else None) or finish_metric(
                await self.sandbox.run(
                    kind="metric", code=code, function=function, args=[result, expected], kwargs=options,
                    read_only=self.sandbox.artifact_files(result, expected),
                )
            )
        return log_outcome(call, kind="metric", function=function, task_id=task_id, executor=self.name)

    async def run_getter(
        self,
        code: str,
        function: str,
        env: Environment,
        config: Mapping[str, Any],
        *,
        task_id: str | None = None,
    ) -> JudgeCall:
        call = await self._host_getter(code, function, env, config)
        return log_outcome(call, kind="getter", function=function, task_id=task_id, executor=self.name)

    async def _host_getter(self, code: str, function: str, env: Environment, config: Mapping[str, Any]) -> JudgeCall:
        home = getattr(env, "home_dir", None)
        if getattr(env, "isolated", False) or home is None:
            return JudgeCall(CRASHED, None, (
                f"the '{self.name}' judge executor runs getters on this host, but environment "
                f"{getattr(env, 'env_id', '?')} is isolated (no home directory on this host); "
                f"use judge.name: in-environment"), 0.0)
        if not Path(home).is_dir():
            return JudgeCall(CRASHED, None, f"environment home directory {home} does not exist", 0.0)
        rejected = self.check(code, EntryPoint(function, "getter"))
        if rejected is not None:
            return rejected
        return await self.sandbox.run(kind="getter", code=code, function=function, args=[dict(config)], kwargs={},
                                      home=Path(home).resolve())
