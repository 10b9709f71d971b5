"""Supervisor for ONE sandboxed judge call, run as ``python -I -S sandbox_runner.py`` (stdlib only).

The host (:mod:`plugins.judges.sandbox`) writes one JSON request on stdin
(``kind``, ``code``, ``function``, ``args``, ``kwargs``, ``limits``,
``isolation``, ``workdir``, ``read_only`` paths, ``site_paths``, optional
``home``); this process confines the judge in a child, watches it, and
prints one JSON report line (``status``, ``value`` or ``error``, the head of
the judge's output) on stdout. Results come back as JSON through a pipe,
never through ``eval``. ``-S`` skips ``site`` (a third of the start-up
time); the judge gets the interpreter's site-packages from ``site_paths``.
It runs before, and outside, anything of the project: standard library only,
plus :mod:`sandbox_confine` next to it (building the jail, running the judge).

Isolation ``namespaces`` (the default wherever the kernel allows it)::

    supervisor (this process, the host's user)
      └─ A  unshare(user, mount, net, pid, ipc, uts); the supervisor maps the
         │  sandbox's root to an unprivileged host uid (a fresh random one
         │  when the host runs as root, else the host's own uid). A builds a
         │  fresh read-only root on a tmpfs: /usr, the Python prefixes, a few
         │  /dev nodes, a size-limited tmpfs scratch (cwd, HOME, TMPDIR), the
         │  environment's home (getters, read-only) and artifact files
         │  (metrics, read-only); then chroot.
         └─ B  pid 1 of the new pid namespace: drops every capability, sets
               no_new_privs and rlimits (CPU, address space, file size,
               processes, open files, core), runs the judge, writes the result.

Nothing else of the host is visible: no /etc, /root, /home, /proc or
network (a fresh network namespace has only a loopback that is down). When B
exits, or the supervisor kills it (wall-clock timeout, output flood, result
too large), the kernel kills every process left in its pid namespace, so
nothing survives a call. B also dies with A, and A with the supervisor.

Isolation ``none`` (only when the config explicitly allows it): B is forked
directly with rlimits, a fresh session, a private scratch directory and a
clean environment; as root it also runs under a fresh unprivileged uid,
which makes RLIMIT_NPROC effective and lets the supervisor kill every
process of that uid afterwards. No network or filesystem isolation.

RLIMIT_NPROC counts per (user namespace, uid) on Linux >= 5.14, so the limit
holds for each call separately even when every call maps the same uid.

``python -I sandbox_runner.py --probe`` runs a trivial judge with namespace
isolation and reports whether it worked, plus the interpreter's
site-packages (used to detect support at startup).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

if __package__:  # imported by the host, as plugins.judges.sandbox_runner
    from plugins.judges import sandbox_confine as confine
else:  # run as a script with -I -S: only the standard library, and this file's directory for a moment
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sandbox_confine as confine

    del sys.path[0]

OUTPUT_HEAD_BYTES = 4096
PROBE_REQUEST = {
    "kind": "getter",
    "code": "def probe(config):\n    return config['answer']\n",
    "function": "probe",
    "args": [{"answer": 42}],
    "kwargs": {},
    "isolation": "namespaces",
    "limits": {},
}
DEFAULT_LIMITS = {
    "wall_timeout_s": 10.0,
    "cpu_time_s": 10,
    "memory_bytes": 512 << 20,
    "file_size_bytes": 16 << 20,
    "scratch_bytes": 64 << 20,
    "max_processes": 8,
    "max_open_files": 64,
    "max_output_bytes": 1 << 20,
    "max_result_bytes": 8 << 20,
}

# -- the supervisor --------------------------------------------------------------


class Watch:
    """Select loop over B's result and output pipes with a deadline."""

    def __init__(self, result_r: int, output_r: int, limits: dict):
        self.result_r, self.output_r, self.limits = result_r, output_r, limits
        self.result = bytearray()
        self.output_head = bytearray()
        self.output_bytes = 0
        self.verdict: tuple[str, str] | None = None  # set when the supervisor had to stop the judge

    def pump(self, done_fd: int, deadline: float) -> bool:
        """Read B's pipes until ``done_fd`` turns readable (True) or the deadline or a limit stops it (False)."""
        watched = [self.result_r, self.output_r, done_fd]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.verdict = ("timeout", f"wall-clock limit of {self.limits['wall_timeout_s']:g} s exceeded")
                return False
            ready, _, _ = select.select(watched, [], [], remaining)
            if done_fd in ready:
                return True
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    watched.remove(fd)
                elif fd == self.result_r:
                    self.result += chunk
                    if len(self.result) > self.limits["max_result_bytes"] + 4096:
                        self.verdict = ("resource_limit", f"result over the {self.limits['max_result_bytes']} byte limit")
                        return False
                else:
                    self.output_bytes += len(chunk)
                    self.output_head += chunk[: max(0, OUTPUT_HEAD_BYTES - len(self.output_head))]
                    if self.output_bytes > self.limits["max_output_bytes"]:
                        self.verdict = ("resource_limit", f"printed more than {self.limits['max_output_bytes']} bytes")
                        return False

    def drain(self, timeout: float = 2.0) -> None:
        """After B is gone: read what is left (writers are dead, so EOF comes quickly)."""
        end = time.monotonic() + timeout
        for fd in (self.result_r, self.output_r):
            os.set_blocking(fd, False)
        while time.monotonic() < end:
            ready, _, _ = select.select([self.result_r, self.output_r], [], [], 0.05)
            if not ready:
                return
            progressed = False
            for fd in ready:
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if chunk:
                    progressed = True
                    if fd == self.result_r and len(self.result) <= self.limits["max_result_bytes"] + 4096:
                        self.result += chunk
            if not progressed:
                return


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def report_from_payload(payload: object, output: str) -> dict:
    """The report for the judge's own result message (shared with the in-environment executor)."""
    if isinstance(payload, dict) and payload.get("ok") is True and "value" in payload:
        return {"status": "ok", "value": payload["value"], "output": output}
    if not isinstance(payload, dict):
        return {"status": "crashed", "error": "the judge process wrote a malformed result", "output": output}
    exc_type = str(payload.get("exc_type", "Error"))
    message = f"{exc_type}: {payload.get('message', '')}"
    if payload.get("setup_error"):
        return {"status": "sandbox_error", "error": f"sandbox setup failed: {message}", "output": output}
    if payload.get("unserializable"):
        return {"status": "invalid_score", "error": payload.get("message"), "output": output}
    if payload.get("too_large"):
        return {"status": "resource_limit", "error": payload.get("message"), "output": output}
    err = payload.get("errno")
    status = confine.classify_exception(exc_type, err if isinstance(err, int) else None)
    tail = str(payload.get("traceback", ""))[-1500:]
    return {"status": status, "error": message + ("\n" + tail if tail else ""), "output": output}


def report_from_signal(sig: int, limits: dict, output: str) -> dict:
    """The report for a judge killed by signal ``sig`` before it wrote a result."""
    if sig in (signal.SIGXCPU, signal.SIGKILL):
        return {"status": "resource_limit", "output": output,
                "error": f"killed by {_signal_name(sig)}: CPU-time limit of {limits['cpu_time_s']} s exceeded"}
    if sig == signal.SIGXFSZ:
        return {"status": "resource_limit", "output": output, "error": "file-size limit exceeded"}
    if sig == signal.SIGALRM:
        return {"status": "timeout", "output": output,
                "error": f"wall-clock limit of {limits['wall_timeout_s']:g} s exceeded"}
    return {"status": "crashed", "error": f"killed by {_signal_name(sig)}", "output": output}


def verdict_for(watch: Watch, wait_status: int | None, limits: dict) -> dict:
    """The report for one finished call."""
    output = watch.output_head.decode("utf-8", "replace")
    if watch.verdict is not None:
        return {"status": watch.verdict[0], "error": watch.verdict[1], "output": output}
    if watch.result:
        try:
            payload = json.loads(bytes(watch.result))
        except ValueError:
            payload = None
        return report_from_payload(payload, output)
    if wait_status is None:
        return {"status": "crashed", "error": "the judge process vanished without a result", "output": output}
    if os.WIFSIGNALED(wait_status):
        return report_from_signal(os.WTERMSIG(wait_status), limits, output)
    code = os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else wait_status
    return {"status": "crashed", "error": f"exited with status {code} without returning a result", "output": output}


def _pipes() -> tuple[int, int, int, int]:
    result_r, result_w = os.pipe()
    output_r, output_w = os.pipe()
    return result_r, result_w, output_r, output_w


def supervise_namespaces(request: dict) -> dict:
    limits = request["limits"]
    result_r, result_w, output_r, output_w = _pipes()
    up_r, up_w = os.pipe()  # A -> supervisor: "ready", B's pid, B's wait status
    go_r, go_w = os.pipe()  # supervisor -> A: maps written
    uid, gid = confine.sandbox_ids(request)
    pid_a = os.fork()
    if pid_a == 0:  # ---------------------------------------------------------- A
        for fd in (result_r, output_r, up_r, go_w):
            os.close(fd)
        try:
            confine.check(confine.libc.unshare(confine.NAMESPACES), "unshare(user, mount, net, pid, ipc, uts)")
            os.write(up_w, b"R")
            if os.read(go_r, 1) != b"G":
                os._exit(71)
            confine.build_root(request)
            confine.prctl(confine.PR_SET_PDEATHSIG, signal.SIGKILL)  # reset by the uid change above
            pid_b = os.fork()
            if pid_b == 0:
                os.close(up_w)
                confine.run_judge(request, result_w, output_w, confined=True, extra_processes=1)
            os.close(result_w)
            os.close(output_w)
            os.write(up_w, f"P{pid_b}\n".encode())
            _, status = os.waitpid(pid_b, 0)
            os.write(up_w, f"W{status}\n".encode())
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001
            try:
                os.write(up_w, f"E{type(exc).__name__}: {exc}\n".encode()[:4000])
            finally:
                os._exit(72)
    # ------------------------------------------------------------------ supervisor
    for fd in (result_w, output_w, go_r):
        os.close(fd)
    up = _LineReader(up_r)
    started = time.monotonic()
    try:
        first = up.read_until(started + 10.0)
        if first != "R":
            return _setup_failure(first)
        try:
            if not request["host_is_root"]:
                _write_file(f"/proc/{pid_a}/setgroups", "deny")
            _write_file(f"/proc/{pid_a}/uid_map", f"0 {uid} 1\n")
            _write_file(f"/proc/{pid_a}/gid_map", f"0 {gid} 1\n")
        except OSError as exc:
            os.kill(pid_a, signal.SIGKILL)
            os.waitpid(pid_a, 0)
            return {"status": "sandbox_error", "error": f"cannot map the sandbox user: {exc}"}
        os.write(go_w, b"G")
        line = up.read_until(started + 10.0)
        if not line.startswith("P"):
            return _setup_failure(line)
        pid_b = int(line[1:])
        watch = Watch(result_r, output_r, limits)
        deadline = time.monotonic() + float(limits["wall_timeout_s"])
        # B may already be done (its status line buffered); else watch until it is.
        if not up.has_line() and not watch.pump(up.fd, deadline):
            _kill(pid_b)
        line = up.read_until(time.monotonic() + 10.0)
        wait_status = int(line[1:]) if line.startswith("W") else None
        watch.drain()
        report = verdict_for(watch, wait_status, limits)
        report["sandbox_uid"] = uid
        return report
    finally:
        _kill(pid_a)
        try:
            os.waitpid(pid_a, 0)
        except ChildProcessError:
            pass
        for fd in (result_r, output_r, up_r, go_w):
            try:
                os.close(fd)
            except OSError:
                pass


def _setup_failure(line: str) -> dict:
    reason = line[1:] if line.startswith("E") else (line or "no answer from the sandbox process")
    return {"status": "sandbox_error", "error": f"sandbox setup failed: {reason}"}


class _LineReader:
    """Lines from A's status pipe, with deadlines."""

    def __init__(self, fd: int):
        self.fd, self.buffer = fd, b""

    def has_line(self) -> bool:
        return b"\n" in self.buffer

    def read_until(self, deadline: float) -> str:
        while b"\n" not in self.buffer and not self.buffer.startswith(b"R"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return ""
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                return ""
            chunk = os.read(self.fd, 4096)
            if not chunk:
                break
            self.buffer += chunk
        if self.buffer.startswith(b"R"):
            self.buffer = self.buffer[1:]
            return "R"
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace")


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def supervise_unconfined(request: dict) -> dict:
    """Isolation ``none``: rlimits, session, scratch dir, clean env; a fresh uid when root."""
    limits = request["limits"]
    result_r, result_w, output_r, output_w = _pipes()
    uid = None
    if request["host_is_root"]:
        uid, _ = confine.sandbox_ids(request)
        os.chown(request["cwd"], uid, uid)
    pid_b = os.fork()
    if pid_b == 0:
        os.close(result_r)
        os.close(output_r)
        if uid is not None:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        confine.run_judge(request, result_w, output_w, confined=False, extra_processes=0)
    os.close(result_w)
    os.close(output_w)
    pidfd = os.pidfd_open(pid_b)
    watch = Watch(result_r, output_r, limits)
    try:
        deadline = time.monotonic() + float(limits["wall_timeout_s"])
        if not watch.pump(pidfd, deadline):
            _kill(pid_b)
        _, wait_status = os.waitpid(pid_b, 0)
        _kill_session(pid_b, uid)
        watch.drain()
        report = verdict_for(watch, wait_status, limits)
        report["sandbox_uid"] = uid
        return report
    finally:
        for fd in (pidfd, result_r, output_r):
            os.close(fd)


def _kill_session(pid_b: int, uid: int | None) -> None:
    """Kill what the judge left behind: its process group, and every process of its uid."""
    try:
        os.killpg(pid_b, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if uid is None:
        return
    for _ in range(50):
        sweeper = os.fork()
        if sweeper == 0:  # kill(-1) as that uid reaches exactly the processes of that uid
            try:
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(sweeper, 0)
        if not _processes_of(uid):
            return
        time.sleep(0.01)


def _processes_of(uid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    found.append(int(name))
            except OSError:
                pass
    return found


def prepare(request: dict) -> dict:
    limits = dict(DEFAULT_LIMITS)
    limits.update(request.get("limits") or {})
    request["limits"] = limits
    request["host_is_root"] = os.geteuid() == 0
    request.setdefault("args", [])
    request.setdefault("kwargs", {})
    request.setdefault("read_only", [])
    request.setdefault("site_paths", [])
    confined = request.get("isolation", "namespaces") == "namespaces"
    if "workdir" not in request:
        import tempfile

        request["workdir"] = tempfile.mkdtemp(prefix="scalecua-probe-")
    scratch = "/scratch" if confined else request["workdir"]
    home = request.get("home") or scratch
    request.setdefault("cwd", home)
    env = {"HOME": home, "TMPDIR": scratch, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "MPLCONFIGDIR": scratch}
    env.update(request.get("env") or {})
    request["env"] = env
    return request


def main(argv: list[str]) -> int:
    probe = argv[1:] == ["--probe"]
    try:
        request = dict(PROBE_REQUEST) if probe else json.loads(sys.stdin.buffer.read())
        request = prepare(request)
    except (ValueError, KeyError, TypeError) as exc:
        report = {"status": "sandbox_error", "error": f"bad request: {exc}"}
    else:
        started = time.monotonic()
        try:
            if request.get("isolation", "namespaces") == "namespaces":
                report = supervise_namespaces(request)
            else:
                report = supervise_unconfined(request)
        except Exception as exc:  # noqa: BLE001 - reported, never a traceback on the host's pipe
            report = {"status": "sandbox_error", "error": f"supervisor failed: {type(exc).__name__}: {exc}"}
        report["duration_s"] = round(time.monotonic() - started, 4)
        if probe:
            import site

            os.rmdir(request["workdir"])
            report["ok"] = report.get("status") == "ok" and report.get("value") == 42
            report["site_paths"] = [p for p in site.getsitepackages() if os.path.isdir(p)]
    sys.stdout.write(json.dumps(report, allow_nan=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
