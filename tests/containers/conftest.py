"""Fixtures for the container tests: podman's Docker-compatible socket, the minimal image, the OSWorld stand-in.

Everything is real: podman (runtime runc, the ulimits this machine allows)
serves the Docker API on a socket of each test module's own; the backends reach it
through the ``docker`` SDK. The ``minimal`` image is built once by the same
code users run (``python -m environments.containers.build``) and is cached by
content hash, so an unchanged tree skips the build.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.containers import build
from environments.containers.engine import LABEL_OWNER, owner_label
from environments.containers.podman_service import PodmanService

STANDIN_DIR = Path(__file__).resolve().parent / "osworld_standin"
#: the limits this machine's kernel lets runc set (see the project's machine notes)
ULIMITS = {"nofile": 1024, "nproc": 1024}


def ours() -> list[str]:
    """Names of containers this test process started that still exist (running or not)."""
    proc = subprocess.run(["podman", "ps", "-a", "--filter", f"label={LABEL_OWNER}={owner_label()}",
                           "--format", "{{.Names}}"], capture_output=True, text=True, check=True)
    return proc.stdout.split()


@pytest.fixture(scope="module")
def podman_service() -> Iterator[PodmanService]:
    """podman's API on a socket of the module's own; stopped after the module (it starts in ~0.1 s), so no
    service outlives the container tests while other areas' tests run."""
    with tempfile.TemporaryDirectory(prefix="scalecua-podman-") as scratch, \
            PodmanService(Path(scratch) / "podman.sock", runtime="runc") as service:
        yield service
    leftover = ours()
    assert not leftover, f"containers left behind: {leftover}"


@pytest.fixture(scope="session")
def minimal_image() -> str:
    return build.build_image("minimal", runtime="runc").image


@pytest.fixture(scope="session")
def standin_image(minimal_image: str) -> str:
    """The OSWorld stand-in (``osworld_standin/``) on top of the minimal image, cached by content hash."""
    with tempfile.TemporaryDirectory(prefix="scalecua-standin-") as scratch:
        context = Path(scratch)
        shutil.copy2(STANDIN_DIR / "Containerfile", context / "Containerfile")
        shutil.copy2(STANDIN_DIR / "standin.py", context / "standin.py")
        dists = build.distribution_closure(["pyautogui"])
        build.copy_distributions(dists, context / "site", "bookworm")
        digest = build._digest([minimal_image.encode(), (context / "Containerfile").read_bytes(),
                                (context / "standin.py").read_bytes(),
                                *(f"{d.metadata['Name']}=={d.version}".encode() for d in dists)])
        tag = f"localhost/scalecua/osworld-standin:{digest[:12]}"
        if not build.image_exists("podman", tag):
            build.build_from_context(context, tag, runtime="runc", build_args={"BASE": minimal_image})
    return tag
