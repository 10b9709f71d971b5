"""One desktop session per environment: Xvfb + D-Bus + window manager + probe, supervised.

``python -m environments.display --env-id ID --home DIR --runtime-dir DIR [--size 1280x800x24] ...``
starts, in order, Xvfb (``-displayfd``: the server picks a free display
number itself, so parallel sessions never race for one), a private D-Bus
session bus, the window manager and the probe (``--port 0``: it picks a free
port), then prints one JSON line ``{"display", "probe_port", "pids"}``.

Nothing may outlive its owner. The session process

* is a child subreaper (``PR_SET_CHILD_SUBREAPER``): daemonizing apps
  (``soffice``, ``xdg-open``) re-parent to it instead of to init;
* gives each direct child ``PR_SET_PDEATHSIG(SIGKILL)``, so if the session is
  killed outright, Xvfb and the probe die with it (and X apps follow Xvfb);
* watches its parent: when the backend that started it dies (even by
  SIGKILL), it kills everything of this environment and exits;
* tags every process with ``SCALECUA_ENV_ID`` in its environment, so
  :func:`sweep` finds stragglers that escaped the process tree.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Sequence

from environments import desktop_user

ENV_TAG = "SCALECUA_ENV_ID"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
WATCH_INTERVAL_S = 0.1

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int) -> None:
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


# ---------------------------------------------------------------------------
# Finding and killing an environment's processes (used by the backend too)
# ---------------------------------------------------------------------------


def tagged_processes(env_id: str) -> list[int]:
    """Pids whose environment carries ``SCALECUA_ENV_ID=env_id`` (all of one environment's processes)."""
    marker = f"{ENV_TAG}={env_id}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(entry.name))
        except OSError:
            continue  # gone, or not ours to read
    return found


def kill_pids(pids: Iterable[int], grace_s: float = 2.0) -> None:
    """SIGTERM, wait up to ``grace_s`` for them to go, SIGKILL the rest."""
    pending = set(pids)
    for pid in list(pending):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pending.discard(pid)
    deadline = time.monotonic() + grace_s
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = {pid for pid in pending if is_alive(pid)}
    for pid in pending:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def is_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != b"Z"


def sweep(env_id: str, *, keep: Iterable[int] = (), grace_s: float = 2.0) -> list[int]:
    """Kill every process of environment ``env_id`` except ``keep``; returns the pids it signalled."""
    spare = set(keep) | {os.getpid()}
    victims = [pid for pid in tagged_processes(env_id) if pid not in spare]
    kill_pids(victims, grace_s)
    return victims


# ---------------------------------------------------------------------------
# The session process
# ---------------------------------------------------------------------------


class SessionError(RuntimeError):
    pass


def _die_with_parent(expected_parent: int) -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != expected_parent:  # the session died before prctl took effect
        os._exit(1)


def _read_line(fd: int, timeout: float, what: str) -> str:
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SessionError(f"{what} did not start within {timeout:g} s")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise SessionError(f"{what} exited during startup (see the session log)")
            data += chunk
    return data.split(b"\n", 1)[0].decode()


class Session:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.pids: dict[str, int] = {}
        self.parent = os.getppid()
        self.env = self._environment()
        #: the unprivileged user the session bus, the apps and the agent's shell run as (None: ours)
        self.user = desktop_user.lookup(args.user) if args.user else None

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("XAUTHORITY", "WAYLAND_DISPLAY", "SESSION_MANAGER",
                                                                 "DBUS_SESSION_BUS_ADDRESS", "DISPLAY")}
        env.update({ENV_TAG: self.args.env_id, "HOME": self.args.home, "XDG_RUNTIME_DIR": self.args.runtime_dir,
                    "LANG": env.get("LANG") or "C.UTF-8"})
        if not self.args.accessibility:
            env["NO_AT_BRIDGE"] = "1"  # GTK apps skip the AT-SPI bus (faster start, no a11y daemons)
        else:
            env.update({"GTK_MODULES": "gail:atk-bridge", "QT_ACCESSIBILITY": "1", "ACCESSIBILITY_ENABLED": "1"})
        return env

    def _spawn(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None, as_user: bool = False,
               **kwargs: object) -> subprocess.Popen[bytes]:
        if as_user and self.user is not None:
            kwargs.update(self.user.popen_kwargs())
            env = self.user.child_env(env or self.env, self.args.home)
        me = os.getpid()
        proc = subprocess.Popen(  # type: ignore[call-overload]
            argv, env=env or self.env, cwd=self.args.home, stdin=subprocess.DEVNULL,
            preexec_fn=lambda: _die_with_parent(me), **kwargs,
        )
        self.pids[name] = proc.pid
        return proc

    def start(self) -> dict[str, object]:
        a = self.args
        timeout = a.startup_timeout
        read_fd, write_fd = os.pipe()
        self._spawn("xvfb", ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", a.size, "-nolisten", "tcp",
                             "-noreset", "-dpi", "96"], pass_fds=(write_fd,), stdout=subprocess.DEVNULL)
        os.close(write_fd)
        display = ":" + _read_line(read_fd, timeout, "Xvfb").strip()
        os.close(read_fd)
        self.env["DISPLAY"] = display

        bus = self._spawn("dbus", ["dbus-daemon", "--session", "--nofork", "--nopidfile",
                                   "--address=unix:tmpdir=/tmp", "--print-address=1"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, as_user=True)
        assert bus.stdout is not None
        self.env["DBUS_SESSION_BUS_ADDRESS"] = _read_line(bus.stdout.fileno(), timeout, "dbus-daemon").strip()

        if a.window_manager != "none":
            self._spawn("wm", [a.window_manager, "--sm-disable"] if a.window_manager == "openbox" else
                        [a.window_manager], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self._wait_for_window_manager(timeout)

        probe_env = {**self.env, "SCALECUA_PROBE_TOKEN": a.token} if a.token else self.env
        probe = self._spawn(
            "probe", [sys.executable, "-m", "environments.probe", "--display", display, "--port", str(a.probe_port),
                      "--host", a.probe_host, "--home", a.home, *(["--no-auth"] if a.no_auth else []),
                      *(["--no-auth-any-host"] if a.no_auth_any_host else []),
                      *(["--user", a.user] if a.user else []),
                      *[arg for module in a.probe_routes for arg in ("--routes", module)]],
            env=probe_env, stdout=subprocess.PIPE,
        )
        assert probe.stdout is not None
        ready = json.loads(_read_line(probe.stdout.fileno(), timeout, "the probe"))
        threading.Thread(target=_drain, args=(probe.stdout,), daemon=True).start()
        return {"display": display, "probe_port": ready["port"], "pids": self.pids,
                # a token we were given is not echoed; one the probe generated is how the caller learns it
                "probe_token": None if a.token else ready.get("token"),
                "dbus_address": self.env["DBUS_SESSION_BUS_ADDRESS"]}

    def _wait_for_window_manager(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], env=self.env, capture_output=True,
                                 text=True, timeout=5).stdout
            if "window id" in out:
                return
            time.sleep(0.05)
        raise SessionError(f"the window manager did not take over the display within {timeout:g} s")

    def supervise(self, stop: threading.Event) -> int:
        """Reap orphans; return when asked to stop, when the parent dies, or when a core process exits."""
        core = {pid: name for name, pid in self.pids.items()}
        while not stop.wait(WATCH_INTERVAL_S):
            if os.getppid() != self.parent:
                print("session: parent died; cleaning up", file=sys.stderr, flush=True)
                return 3
            while True:  # reap re-parented orphans (we are their subreaper)
                try:
                    pid, _status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid in core:
                    print(f"session: {core[pid]} (pid {pid}) exited; shutting down", file=sys.stderr, flush=True)
                    del self.pids[core[pid]]
                    return 4
        return 0

    def shutdown(self) -> None:
        core = set(self.pids.values())
        sweep(self.args.env_id, keep=core, grace_s=2.0)  # apps first, while the display still exists
        for name in ("probe", "wm", "dbus", "xvfb"):
            if name in self.pids:
                kill_pids([self.pids[name]], grace_s=1.0)
        sweep(self.args.env_id, grace_s=0.5)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def _drain(stream) -> None:  # type: ignore[no-untyped-def]
    for line in iter(stream.readline, b""):
        sys.stderr.buffer.write(line)
        sys.stderr.flush()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m environments.display", description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--home", required=True)
    parser.add_argument("--runtime-dir", required=True)
    parser.add_argument("--size", default="1280x800x24", help="WIDTHxHEIGHTxDEPTH")
    parser.add_argument("--window-manager", default="openbox", help="openbox, another WM binary, or none")
    parser.add_argument("--token", default=os.environ.get("SCALECUA_PROBE_TOKEN"),
                        help="the probe's bearer token (default: $SCALECUA_PROBE_TOKEN, else the probe generates one "
                             "and the ready line carries it as probe_token)")
    parser.add_argument("--user", default=None, metavar="NAME",
                        help="the unprivileged user the session bus, apps and commands run as (we must be root)")
    parser.add_argument("--no-auth", action="store_true",
                        help="the probe serves without a token (loopback only; OSWorld-protocol compatibility)")
    parser.add_argument("--no-auth-any-host", action="store_true",
                        help="with --no-auth, the probe binds --probe-host even beyond loopback (the osworld-docker "
                             "image only: see environments.containers.inside)")
    parser.add_argument("--accessibility", action="store_true", help="let apps export AT-SPI trees")
    parser.add_argument("--startup-timeout", type=float, default=30.0)
    # inside a container the probe listens on the container's network (with a token), e.g. 0.0.0.0:5000
    parser.add_argument("--probe-host", default="127.0.0.1", help="address the probe binds (default: loopback)")
    parser.add_argument("--probe-port", type=int, default=0, help="the probe's port (default 0: a free one)")
    parser.add_argument("--probe-routes", action="append", default=[], metavar="MODULE",
                        help="the probe also serves MODULE.ROUTES (repeatable)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    Path(args.runtime_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
    if args.user:  # XDG_RUNTIME_DIR belongs to whoever runs the apps
        user = desktop_user.lookup(args.user)
        os.chown(args.runtime_dir, user.uid, user.gid)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    session = Session(args)
    try:
        info = session.start()
    except (SessionError, OSError, ValueError) as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        session.shutdown()
        return 1
    try:
        print(json.dumps(info), flush=True)
    except OSError:
        pass  # whoever started us is gone; the supervisor notices and cleans up
    code = session.supervise(stop)
    session.shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
