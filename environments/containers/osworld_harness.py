"""OSWorld's own harness, unchanged, on our desktops: our ``osworld`` image under the name its docker provider runs.

OSWorld's ``DesktopEnv(provider_name="docker")`` starts ``happysixd/osworld-docker`` through the Docker API
(``docker.from_env()``, so ``DOCKER_HOST``), publishes the container's ports 5000, 9222, 8006 and 8080 on free host
ports, polls ``GET /screenshot`` and then drives the server with its ``PythonController`` and ``SetupController``
and judges with its getters and metrics. Its provider list is closed, so instead of a provider of our own we give
the docker provider an image it can run::

    python -m environments.containers.osworld_harness build    # our osworld image, tagged as OSWorld's
    python -m environments.containers.osworld_harness engine &  # podman's Docker API (skip it with Docker)
    export DOCKER_HOST=unix:///run/podman/podman.sock
    touch /tmp/no-vm.qcow2                                       # the provider mounts a disk file; ours ignores it
    python run.py --provider_name docker --path_to_vm /tmp/no-vm.qcow2 --headless ...   # in OSWorld's checkout

The tagged image is the ``osworld`` variant (OSWorld's VM conventions: user ``user`` with sudo, LibreOffice, GIMP,
VLC, Thunderbird, ``google-chrome``) with the entry point ``inside osworld-docker``: a 1920x1080 desktop whose probe
answers on port 5000 **without a token**, as OSWorld's VM server does, because the provider passes a fixed
environment and no token can reach the container. The provider publishes that port on every interface of the
host (Docker's default): run it where others cannot reach the host's ports, as you would OSWorld's VM image.
What differs from the VM: no VNC on 8006 (the port is published, nothing answers), no GNOME (no gnome-terminal,
the wallpaper is not painted), no VS Code; ``environments/containers/README.md`` lists the suite's tasks this costs.

An image already present under that name that is not ours (OSWorld's own VM image) is never replaced unless
``--force`` says so; the ``osworld-docker`` backend, which runs OSWorld's VM image, refuses ours by its label.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from core.errors import ScaleCUAError
from environments.containers import build
from environments.containers.podman_service import PodmanService, fitted_ulimits_conf

#: the image OSWorld's docker provider runs (``desktop_env/providers/docker/provider.py``), fully qualified as
#: podman's Docker API resolves the short name
OSWORLD_DOCKER_IMAGE = "docker.io/happysixd/osworld-docker:latest"
#: the label that marks our image under that name (its value: the image it was derived from)
LABEL = "org.scalecua.osworld-docker"
#: where the ``engine`` command serves podman's Docker API by default
ENGINE_SOCKET = Path("/run/podman/podman.sock")

CONTAINERFILE = f"""FROM {{base}}
LABEL {LABEL}={{base}}
# OSWorld's docker provider publishes these: the server, Chrome's DevTools (the suite's socat 9222 -> 1337), VLC
EXPOSE 5000 9222 8080
ENTRYPOINT ["python3", "-m", "environments.containers.inside", "osworld-docker"]
"""


def image_labels(engine_cli: str, image: str) -> dict[str, str] | None:
    """The labels of ``image`` (None when there is no such image)."""
    if not build.image_exists(engine_cli, image):
        return None
    proc = subprocess.run([engine_cli, "image", "inspect", "--format", "{{json .Config.Labels}}", image],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ScaleCUAError(f"`{engine_cli} image inspect {image}` failed: {proc.stderr.strip()[-500:]}")
    return dict(json.loads(proc.stdout.strip() or "null") or {})


def is_ours(engine_cli: str, image: str) -> bool:
    return LABEL in (image_labels(engine_cli, image) or {})


def build_image(variant: str = "osworld", *, engine_cli: str = "podman", runtime: str | None = None,
                force: bool = False, tag: str = OSWORLD_DOCKER_IMAGE) -> str:
    """Build (or find cached) the ``variant`` image and tag it, with the harness's entry point, as ``tag``;
    returns the image the tag was derived from."""
    labels = image_labels(engine_cli, tag)
    if labels is not None and LABEL not in labels and not force:
        raise ScaleCUAError(
            f"{tag} is already here and is not ScaleCUA's (OSWorld's own VM image?); tagging ours under that name "
            f"would hide it. Keep it under another name first (`{engine_cli} tag {tag} happysixd/osworld-docker:vm`), "
            "or pass --force to replace the tag")
    base = build.build_image(variant, engine_cli=engine_cli, runtime=runtime).image
    with tempfile.TemporaryDirectory(prefix="scalecua-osworld-docker-") as scratch:
        context = Path(scratch)
        (context / "Containerfile").write_text(CONTAINERFILE.format(base=base))
        build.build_from_context(context, tag, engine_cli=engine_cli, runtime=runtime)
    return base


def serve_engine(socket_path: Path, runtime: str | None) -> int:
    """podman's Docker API on ``socket_path`` until interrupted (the directory is created)."""
    scratch = Path(tempfile.mkdtemp(prefix="scalecua-osworld-engine-"))
    service = PodmanService(socket_path, runtime=runtime, log_path=scratch / "podman.log",
                            config=fitted_ulimits_conf(scratch))
    with service:  # started before the signals are blocked: podman must not inherit the mask
        print(f"export DOCKER_HOST={service.url}", flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from core.runtime import logs

    parser = argparse.ArgumentParser(prog="python -m environments.containers.osworld_harness",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("build", help=f"build our osworld image and tag it {OSWORLD_DOCKER_IMAGE}")
    make.add_argument("--variant", default="osworld", choices=sorted(build.VARIANTS),
                      help="the image variant under the tag (default osworld: OSWorld's VM conventions)")
    make.add_argument("--engine", default="podman", choices=["podman", "docker"], help="CLI that builds and tags")
    make.add_argument("--runtime", default=None, help="OCI runtime for RUN steps (podman; default runc if present)")
    make.add_argument("--force", action="store_true", help="replace an image of that name that is not ours")
    engine = commands.add_parser("engine", help="serve podman's Docker API for OSWorld's provider (foreground)")
    engine.add_argument("--socket", type=Path, default=ENGINE_SOCKET, help=f"socket path (default {ENGINE_SOCKET})")
    engine.add_argument("--runtime", default="runc", help="podman's OCI runtime (default runc)")
    args = parser.parse_args(argv)
    logs.configure("info")
    if args.command == "engine":
        return serve_engine(args.socket, args.runtime)
    base = build_image(args.variant, engine_cli=args.engine, runtime=args.runtime, force=args.force)
    print(f"{OSWORLD_DOCKER_IMAGE} (from {base}): run OSWorld with --provider_name docker --path_to_vm <any file>")
    return 0


if __name__ == "__main__":
    from core.commands.cli import main_guard

    sys.exit(main_guard(main))
