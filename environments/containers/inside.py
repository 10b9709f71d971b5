"""What runs inside a ``container-desktop`` container (standard library + :mod:`environments.display` only).

``python3 -m environments.containers.inside session``
    The image's entry point: one supervised desktop session (Xvfb, D-Bus, the
    window manager, the probe on ``0.0.0.0:5000``) as the container's main
    process, configured from the environment: ``SCALECUA_ENV_ID`` (default: the
    hostname), ``SCALECUA_SCREEN`` (``1280x800x24``), ``SCALECUA_WINDOW_MANAGER``,
    ``SCALECUA_PROBE_TOKEN`` (required: the probe listens beyond loopback),
    ``SCALECUA_ACCESSIBILITY=1``. Prints the session's JSON ready line.
``python3 -m environments.containers.inside osworld-docker``
    The entry point of the ``osworld-docker`` image (``python -m environments.containers.build --variant osworld
    --as-osworld-docker``): the same session under the contract of OSWorld's docker provider, which runs
    ``happysixd/osworld-docker`` with a fixed environment (no token can be passed) and publishes the container's
    ports 5000 (the server), 9222 (Chrome's DevTools, which the suite's ``socat`` forwards to 1337) and 8080
    (VLC): the probe answers on ``0.0.0.0:5000`` without a token, as OSWorld's VM server does, on a screen of
    its VM's 1920x1080 (``SCALECUA_SCREEN`` still applies), with AT-SPI on (``SCALECUA_ACCESSIBILITY=0`` turns
    it off), as ``DesktopEnv`` asks for the accessibility tree by default; the provider's ``DISK_SIZE``, ``RAM_SIZE``,
    ``CPU_CORES`` and ``KVM`` variables and its ``/System.qcow2`` mount are ignored.
``python3 -m environments.containers.inside template DIR``
    Writes the clean home template (used while building the image).
``python3 -m environments.containers.inside reset --env-id ID --keep PID,PID``
    Between two episodes in one container: kills every process of the desktop
    except the session's own, and makes the home an exact copy of the template.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from environments import display, home_template

HOME = "/home/user"
TEMPLATE = "/opt/scalecua/home-template"
PROBE_PORT = 5000
#: the screen of OSWorld's VM (its DesktopEnv's default ``screen_size``)
OSWORLD_VM_SCREEN = "1920x1080x24"


def _session_argv(screen: str) -> list[str]:
    argv = [
        "--env-id", os.environ.get("SCALECUA_ENV_ID") or socket.gethostname(),
        "--home", os.environ.get("HOME", HOME),
        "--runtime-dir", f"/tmp/runtime-{os.getuid()}",
        "--size", os.environ.get("SCALECUA_SCREEN", screen),
        "--window-manager", os.environ.get("SCALECUA_WINDOW_MANAGER", "openbox"),
        "--startup-timeout", os.environ.get("SCALECUA_STARTUP_TIMEOUT", "60"),
        "--probe-host", "0.0.0.0", "--probe-port", str(PROBE_PORT),
    ]
    if os.environ.get("SCALECUA_ACCESSIBILITY") == "1":
        argv.append("--accessibility")
    return argv


def session(extra: Sequence[str]) -> int:
    if not os.environ.get("SCALECUA_PROBE_TOKEN"):
        print('{"error": "SCALECUA_PROBE_TOKEN is not set: the probe refuses to listen beyond loopback without a '
              'token (podman run -e SCALECUA_PROBE_TOKEN=...)"}', flush=True)
        return 2
    return display.main([*_session_argv("1280x800x24"), *extra])


def osworld_docker_session(extra: Sequence[str]) -> int:
    """OSWorld's docker provider's contract (module docstring): no token, OSWorld's VM screen."""
    if os.environ.get("SCALECUA_PROBE_TOKEN"):
        print('{"error": "SCALECUA_PROBE_TOKEN is set, but the osworld-docker entry point serves OSWorld\'s '
              'clients, which send none: run the image\'s session entry point for a token"}', flush=True)
        return 2
    argv = _session_argv(OSWORLD_VM_SCREEN)
    if os.environ.get("SCALECUA_ACCESSIBILITY") != "0" and "--accessibility" not in argv:
        argv.append("--accessibility")  # DesktopEnv asks for the tree by default (require_a11y_tree)
    return display.main([*argv, "--no-auth", "--no-auth-any-host", *extra])


def restore_home(template: Path, home: Path) -> None:
    """Make ``home``'s contents an exact copy of ``template`` (the home directory itself stays)."""
    for entry in list(home.iterdir()) if home.exists() else []:
        if entry.is_dir() and not entry.is_symlink():
            home_template.remove_tree(entry)
        else:
            entry.unlink(missing_ok=True)
    shutil.copytree(template, home, symlinks=True, dirs_exist_ok=True)


def reset(env_id: str, keep: Sequence[int], home: Path, template: Path) -> int:
    spare = {1, os.getpid(), os.getppid(), *keep}
    killed = display.sweep(env_id, keep=spare, grace_s=2.0)
    restore_home(template, home)
    print(f"killed {len(killed)} processes; home restored from {template}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m environments.containers.inside", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("session", help="run the desktop session (the image's entry point)")
    commands.add_parser("osworld-docker", help="the session as OSWorld's docker provider expects it (no token)")
    template = commands.add_parser("template", help="write the clean home template")
    template.add_argument("directory")
    cleanup = commands.add_parser("reset", help="kill the desktop's apps and restore the home")
    cleanup.add_argument("--env-id", required=True)
    cleanup.add_argument("--keep", default="", help="comma-separated pids of the session's own processes")
    cleanup.add_argument("--home", default=HOME)
    cleanup.add_argument("--template", default=TEMPLATE)
    args, extra = parser.parse_known_args(argv)
    if args.command == "session":
        return session(extra)
    if args.command == "osworld-docker":
        return osworld_docker_session(extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "template":
        home_template.write_default_template(Path(args.directory))
        return 0
    keep = [int(p) for p in args.keep.split(",") if p.strip()]
    return reset(args.env_id, keep, Path(args.home), Path(args.template))


if __name__ == "__main__":
    sys.exit(main())
