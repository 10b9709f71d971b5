"""``python -m environments.probe --display :N --port P [--host H] [--token T | --no-auth] [--routes MODULE]``.

The probe always authenticates: every request must carry ``Authorization: Bearer TOKEN``. Without
``--token`` (or ``$SCALECUA_PROBE_TOKEN``) it generates one and prints it in its ready line, so whoever
started it (and only they) can talk to it; any other local process, root's included, gets 401.
``--no-auth`` serves without a token, on loopback only, for OSWorld-protocol compatibility (upstream's
clients send none); never use it on a machine other users share. ``--no-auth-any-host`` lets ``--no-auth``
bind beyond loopback: only the ``osworld-docker`` image's entry point uses it
(:mod:`environments.containers.osworld_harness`), because OSWorld's docker provider can hand a container no token.

``--routes MODULE`` (repeatable; default ``$SCALECUA_PROBE_ROUTES``, comma-separated) serves the endpoints
of ``MODULE.ROUTES`` besides the probe's own: that is how a plugin adds in-desktop endpoints (ScienceBoard's
``/tex/check`` and ``/lean/check`` come from :mod:`environments.scienceboard.checkers`) without the probe
importing it.

Prints one JSON line ``{"probe": "ready", "host", "port", "display", "token"}`` on
stdout once it accepts connections (``--port 0`` picks a free port, so
whoever starts it learns the port without racing for one).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import threading
from typing import Any, Sequence

from core.runtime import logs
from core.errors import ScaleCUAError
from environments.probe import terminal
from environments.probe.desktop import Desktop
from environments.probe.routes import ROUTES
from environments.probe.state import ProbeState
from environments import desktop_user
from environments.probe.shims import TERMINAL_LOGS, child_python, install_shims
from environments.probe.server import MAX_SERVED_BYTES, ProbeHTTPServer, is_loopback


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m environments.probe", description=__doc__.splitlines()[0])
    parser.add_argument("--display", default=os.environ.get("DISPLAY"), help="X display, e.g. :3 (default: $DISPLAY)")
    parser.add_argument("--port", type=int, default=5000, help="TCP port (0: pick a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--token", default=os.environ.get("SCALECUA_PROBE_TOKEN"),
                        help="require 'Authorization: Bearer TOKEN' (default: $SCALECUA_PROBE_TOKEN)")
    parser.add_argument("--no-auth", action="store_true",
                        help="serve without a token (loopback only; OSWorld-protocol compatibility)")
    parser.add_argument("--no-auth-any-host", action="store_true",
                        help="with --no-auth, bind --host even beyond loopback: only inside the osworld-docker "
                             "image, whose container engine publishes the port as OSWorld's docker provider asks "
                             "(anyone who reaches it runs commands as the desktop's user, as with OSWorld's VM)")
    parser.add_argument("--max-served-bytes", type=int, default=MAX_SERVED_BYTES, metavar="N",
                        help=f"largest file /file, /read or a download hands over (default {MAX_SERVED_BYTES})")
    parser.add_argument("--user", default=None, metavar="NAME",
                        help="run everything the probe starts (apps, commands, scripts) as this unprivileged user "
                             "(the probe must run as root; see environments/desktop_user.py)")
    parser.add_argument("--home", default=os.environ.get("HOME"), help="the desktop user's home directory")
    parser.add_argument("--python", default=sys.executable, help="interpreter for /run_python")
    parser.add_argument("--routes", action="append", metavar="MODULE",
                        help="also serve MODULE.ROUTES (repeatable; default: $SCALECUA_PROBE_ROUTES, comma-separated)")
    return parser


class RoutesError(ValueError):
    """An extension module named by ``--routes`` cannot be served."""


def extension_routes(modules: Sequence[str]) -> dict[tuple[str, str], Any]:
    """The endpoints of each module's ``ROUTES`` mapping, checked against the probe's own and each other's."""
    merged: dict[tuple[str, str], Any] = {}
    owner = {key: "the probe" for key in ROUTES}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise RoutesError(f"--routes {name}: cannot import it ({exc}); name a module importable by the probe's "
                              "Python (in a container image: one the image's variant carries)") from None
        table = getattr(module, "ROUTES", None)
        if not isinstance(table, dict) or not all(
                isinstance(k, tuple) and len(k) == 2 and callable(v) for k, v in table.items()):
            raise RoutesError(f"--routes {name}: the module has no ROUTES mapping of (method, path) -> handler")
        for key, handler in table.items():
            if key in owner:
                raise RoutesError(f"--routes {name}: {key[0]} {key[1]} is already served by {owner[key]}")
            owner[key] = name
            merged[key] = handler
    return merged


def _route_modules(args: argparse.Namespace) -> list[str]:
    if args.routes is not None:
        return list(args.routes)
    return [m.strip() for m in os.environ.get("SCALECUA_PROBE_ROUTES", "").split(",") if m.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure("info")  # stderr only: stdout carries the ready line
    if not args.display:
        print("probe: no display: pass --display :N (or set DISPLAY)", file=sys.stderr)
        return 2
    if args.max_served_bytes < 1:
        print(f"probe: --max-served-bytes must be positive, got {args.max_served_bytes}", file=sys.stderr)
        return 2
    if args.no_auth and args.token:
        print("probe: --no-auth and a token (--token or SCALECUA_PROBE_TOKEN) contradict each other: drop one",
              file=sys.stderr)
        return 2
    if args.no_auth_any_host and not args.no_auth:
        print("probe: --no-auth-any-host only qualifies --no-auth: add --no-auth or drop it", file=sys.stderr)
        return 2
    if args.no_auth and not is_loopback(args.host) and not args.no_auth_any_host:
        print(
            f"probe: refusing to bind {args.host} without a token: anyone who reaches the port could run commands. "
            "Drop --no-auth (a token is then generated and printed), or bind 127.0.0.1.",
            file=sys.stderr,
        )
        return 2
    token = None if args.no_auth else (args.token or secrets.token_urlsafe(24))
    home = os.path.abspath(args.home or os.getcwd())
    if not os.path.isdir(home):
        print(f"probe: --home {home} is not a directory", file=sys.stderr)
        return 2
    try:
        routes = {**ROUTES, **extension_routes(_route_modules(args))}
    except RoutesError as exc:
        print(f"probe: {exc}", file=sys.stderr)
        return 2
    try:
        user = desktop_user.lookup(args.user) if args.user else None
    except (KeyError, ScaleCUAError) as exc:
        reason = exc if isinstance(exc, ScaleCUAError) else "no such user"
        print(f"probe: --user {args.user}: {reason}", file=sys.stderr)
        return 2
    if user is not None and os.geteuid() != 0:
        print(f"probe: --user {args.user} needs the probe to run as root (it starts children as that user)",
              file=sys.stderr)
        return 2
    # the probe's children (apps, commands) see the desktop's display and home, and what OSWorld's setups expect;
    # never the probe's token (an agent's shell that read it could drive the probe)
    shims = tempfile.mkdtemp(prefix="scalecua-probe-", dir=os.environ.get("XDG_RUNTIME_DIR"))  # the session's
    os.chmod(shims, 0o755)
    python = child_python(args.python, user)
    env = {k: v for k, v in os.environ.items() if k != "SCALECUA_PROBE_TOKEN"}
    # an image whose user has a real sudo says so (SCALECUA_SYSTEM_SUDO=1, the osworld variant); a probe that
    # confines a host's user (--user: local-desktop) never hands its children the host's sudo
    system_sudo = os.environ.get("SCALECUA_SYSTEM_SUDO") == "1" and user is None
    fallback = python != args.python  # the system's python3: pyautogui is copied beside it, reached through the shim
    env.update({"DISPLAY": args.display, "HOME": home,
                **install_shims(shims, python, system_sudo=system_sudo, with_pyautogui=fallback, user=user)})
    terminal_logs = os.path.join(shims, TERMINAL_LOGS)
    state = ProbeState(desktop=Desktop(args.display), home=home, env=user.child_env(env, home) if user else env,
                       python=os.path.join(shims, "python") if fallback else python, routes=routes,
                       max_served_bytes=args.max_served_bytes, user=user,
                       terminal_logs=terminal_logs if os.path.isdir(terminal_logs) else None)
    try:
        server = ProbeHTTPServer((args.host, args.port), routes, state, token)
    except OSError as exc:
        print(f"probe: cannot bind {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2

    def stop(signum: int, _frame: object) -> None:
        # shutdown() blocks until serve_forever returns, so it runs on another thread
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    stopped = threading.Event()
    terminal.keep_logs_bounded(state, stopped)
    port = server.server_address[1]
    # the token goes to stdout, which only the process that started the probe reads
    print(json.dumps({"probe": "ready", "host": args.host, "port": port, "display": args.display, "token": token}),
          flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        stopped.set()
        server.server_close()
        state.launcher.terminate_all()
        state.recorder.close()
        shutil.rmtree(shims, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
