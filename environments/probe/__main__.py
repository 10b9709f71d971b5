"""``python -m environments.probe --display :N --port P [--host H] [--token T] [--home DIR]``.

Prints one JSON line ``{"probe": "ready", "host", "port", "display"}`` on
stdout once it accepts connections (``--port 0`` picks a free port, so
whoever starts it learns the port without racing for one).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Sequence

from core import logs
from environments.probe.desktop import Desktop
from environments.probe.routes import ROUTES, ProbeState
from environments.probe.server import ProbeHTTPServer, is_loopback


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m environments.probe", description=__doc__.splitlines()[0])
    parser.add_argument("--display", default=os.environ.get("DISPLAY"), help="X display, e.g. :3 (default: $DISPLAY)")
    parser.add_argument("--port", type=int, default=5000, help="TCP port (0: pick a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    parser.add_argument("--token", default=os.environ.get("SCALECUA_PROBE_TOKEN"),
                        help="require 'Authorization: Bearer TOKEN' (default: $SCALECUA_PROBE_TOKEN)")
    parser.add_argument("--home", default=os.environ.get("HOME"), help="the desktop user's home directory")
    parser.add_argument("--python", default=sys.executable, help="interpreter for /run_python")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure("info")  # stderr only: stdout carries the ready line
    if not args.display:
        print("probe: no display: pass --display :N (or set DISPLAY)", file=sys.stderr)
        return 2
    if not is_loopback(args.host) and not args.token:
        print(
            f"probe: refusing to bind {args.host} without a token: anyone who reaches the port could run commands. "
            "Pass --token (or SCALECUA_PROBE_TOKEN), or bind 127.0.0.1.",
            file=sys.stderr,
        )
        return 2
    home = os.path.abspath(args.home or os.getcwd())
    if not os.path.isdir(home):
        print(f"probe: --home {home} is not a directory", file=sys.stderr)
        return 2
    # the probe's children (apps, commands) see the desktop's display and home
    os.environ.update({"DISPLAY": args.display, "HOME": home})
    state = ProbeState(desktop=Desktop(args.display), home=home, env=dict(os.environ), python=args.python)
    try:
        server = ProbeHTTPServer((args.host, args.port), ROUTES, state, args.token)
    except OSError as exc:
        print(f"probe: cannot bind {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2

    def stop(signum: int, _frame: object) -> None:
        # shutdown() blocks until serve_forever returns, so it runs on another thread
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = server.server_address[1]
    print(json.dumps({"probe": "ready", "host": args.host, "port": port, "display": args.display}), flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        state.launcher.terminate_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
