"""What runs inside a ``container-desktop`` container (standard library + :mod:`environments.display` only).

``python3 -m environments.containers.inside session``
    The image's entry point: one supervised desktop session (Xvfb, D-Bus, the
    window manager, the probe on ``0.0.0.0:5000``) as the container's main
    process, configured from the environment: ``SCALECUA_ENV_ID`` (default: the
    hostname), ``SCALECUA_SCREEN`` (``1280x800x24``), ``SCALECUA_WINDOW_MANAGER``,
    ``SCALECUA_PROBE_TOKEN`` (required: the probe listens beyond loopback),
    ``SCALECUA_ACCESSIBILITY=1``. Prints the session's JSON ready line.
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


def session(extra: Sequence[str]) -> int:
    if not os.environ.get("SCALECUA_PROBE_TOKEN"):
        print('{"error": "SCALECUA_PROBE_TOKEN is not set: the probe refuses to listen beyond loopback without a '
              'token (podman run -e SCALECUA_PROBE_TOKEN=...)"}', flush=True)
        return 2
    argv = [
        "--env-id", os.environ.get("SCALECUA_ENV_ID") or socket.gethostname(),
        "--home", os.environ.get("HOME", HOME),
        "--runtime-dir", f"/tmp/runtime-{os.getuid()}",
        "--size", os.environ.get("SCALECUA_SCREEN", "1280x800x24"),
        "--window-manager", os.environ.get("SCALECUA_WINDOW_MANAGER", "openbox"),
        "--startup-timeout", os.environ.get("SCALECUA_STARTUP_TIMEOUT", "60"),
        "--probe-host", "0.0.0.0", "--probe-port", str(PROBE_PORT),
    ]
    if os.environ.get("SCALECUA_ACCESSIBILITY") == "1":
        argv.append("--accessibility")
    return display.main([*argv, *extra])


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
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "template":
        home_template.write_default_template(Path(args.directory))
        return 0
    keep = [int(p) for p in args.keep.split(",") if p.strip()]
    return reset(args.env_id, keep, Path(args.home), Path(args.template))


if __name__ == "__main__":
    sys.exit(main())
