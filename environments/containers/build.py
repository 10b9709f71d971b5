"""``python -m environments.containers.build [--variant NAME] [--json]``: build the container-desktop image.

Two cached stages, each tagged by a hash of what went into it, so an
unchanged stage is never rebuilt:

1. **Base filesystem** (``localhost/scalecua/desktop-base:<variant>-<hash>``):
   ``mmdebstrap`` installs the variant's Debian packages (with apt's real
   dependency resolution) straight into a tar stream that ``podman import``
   turns into an image: no registry, no base image pulled. Documentation,
   man pages and translations are left out (``dpkg path-exclude``), and the
   unpacking happens on tmpfs when there is room.
2. **Image** (``localhost/scalecua/container-desktop:<variant>-<hash>``, also
   tagged ``:<variant>``): ``image/Containerfile`` adds our probe and the
   Python packages it needs (copied from this interpreter's environment, so
   the probe runs the exact versions the tests ran), the desktop user and the
   clean home template.

Variants: ``full`` (the user-facing default: openbox and every bundled task's
applications: xterm, mousepad, LibreOffice Calc/Writer, Chromium, AT-SPI),
``minimal`` (for CI: matchbox and the terminal/editor/file tasks' apps only),
``osworld`` (OSWorld's suite on its VM's conventions: LibreOffice, GIMP, VLC,
Thunderbird, Chromium as ``google-chrome``, user ``user`` with sudo, ``python``
with pyautogui) and ``scienceboard``. A variant's packages, window manager,
extra Python distributions and VM conventions (:class:`Variant`) reach the
Containerfile as build arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

import structlog

from core.errors import ScaleCUAError
from environments.containers.rootless import rootless_problem

log = structlog.get_logger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGE_DIR = Path(__file__).resolve().parent / "image"
IMAGE_REPOSITORY = "localhost/scalecua/container-desktop"
BASE_REPOSITORY = "localhost/scalecua/desktop-base"
#: bump when the way images are made changes (invalidates every cached stage)
BUILDER_VERSION = "1"

#: the image's Python (Debian's python3 of the suite); compiled packages must match it
SUITE_PYTHON = {"bookworm": (3, 11), "trixie": (3, 13)}
#: modules the probe and the in-container helpers import (their project files are copied)
PROBE_MODULES = ("environments.probe.__main__", "environments.probe.routes", "environments.display",
                 "environments.containers.inside")
#: Python distributions the probe needs, with their dependencies
PROBE_DISTRIBUTIONS = ("pydantic", "structlog", "numpy", "mss", "pluggy")
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*",
                 "/usr/share/lintian/*")
DPKG_INCLUDES = ("/usr/share/doc/*/copyright", "/usr/share/locale/locale.alias")
ULIMITS = ("nofile=1024:1024", "nproc=1024:1024")  # within this machine's hard limits (see this-machine notes)

COMMON_PACKAGES = ("python3", "xvfb", "xdotool", "x11-utils", "dbus", "procps", "passwd", "fonts-dejavu-core")

#: the applications of OSWorld's suite that Debian packages (nautilus: multi_apps tasks open folders in it)
OSWORLD_APPS = ("openbox", "xterm", "libreoffice-calc", "libreoffice-writer", "libreoffice-impress", "gimp", "vlc",
                "totem", "thunderbird", "chromium", "nautilus", "at-spi2-core", "python3-pyatspi", "xdg-utils", "imagemagick")
#: what the suite's setup and postconfig commands call on its VM (sudo, python, socat, curl, pip, unzip, gsettings,
#: gio, xsel, wmctrl, update-desktop-database, jq, ...), ffmpeg (the server's /start_recording) and the fonts its
#: documents are drawn in
OSWORLD_VM = ("sudo", "ffmpeg", "python-is-python3", "python3-tk", "python3-pip", "socat", "curl", "wget",
              "ca-certificates", "unzip", "zip", "jq", "xsel", "wmctrl", "libglib2.0-bin", "gsettings-desktop-schemas",
              "dconf-gsettings-backend", "desktop-file-utils", "fonts-liberation2", "fonts-crosextra-carlito",
              "fonts-crosextra-caladea")


@dataclass(frozen=True)
class Variant:
    packages: tuple[str, ...]
    window_manager: str
    #: mmdebstrap variant: essential (no apt in the image) or apt (derived images can apt-get install)
    base: str = "essential"
    description: str = ""
    #: project modules the image carries besides the probe's (e.g. probe endpoint extensions, see --routes)
    modules: tuple[str, ...] = ()
    #: Python distributions the image carries besides the probe's (copied with their dependencies into site/,
    #: on every python3's path), e.g. pyautogui for OSWorld's setup commands
    distributions: tuple[str, ...] = ()
    #: the desktop user's password; when set, ``sudo`` (the package must be in ``packages``) grants the user root
    #: with it, as OSWorld's VM does, and the probe leaves the real sudo in place of its unprivileged shim
    user_password: str | None = None
    #: ``google-chrome`` is Chromium (``image/google-chrome``: Chrome's profile directory, the DevTools port asked for)
    google_chrome: bool = False
    #: ``pip install`` may write the system's Python, as on OSWorld's Ubuntu 22.04 (Debian's PEP 668 marker removed)
    system_pip: bool = False

    def build_args(self) -> dict[str, str]:
        """The Containerfile's build arguments for this variant (besides BASE)."""
        return {"WINDOW_MANAGER": self.window_manager, "USER_PASSWORD": self.user_password or "",
                "SYSTEM_SUDO": "1" if self.user_password else "0", "GOOGLE_CHROME": "1" if self.google_chrome else "0",
                "SYSTEM_PIP": "1" if self.system_pip else "0"}


VARIANTS = {
    "full": Variant(
        COMMON_PACKAGES + ("openbox", "xterm", "mousepad", "libreoffice-calc", "libreoffice-writer",
                           "libreoffice-impress", "chromium", "imagemagick", "at-spi2-core", "python3-pyatspi",
                           "xdg-utils", "fonts-liberation2"),
        "openbox", base="apt", description="every bundled task's applications (user-facing default)",
    ),
    "minimal": Variant(
        # python3-tk: pyautogui (OSWorld's action runner) needs tkinter; the tests' OSWorld stand-in adds pyautogui
        COMMON_PACKAGES + ("matchbox-window-manager", "xterm", "mousepad", "python3-tk"),
        "matchbox-window-manager", description="terminal, editor and file tasks only (CI)",
    ),
    # ScienceBoard's applications that Debian packages (environments/scienceboard/README.md adds the others)
    "scienceboard": Variant(
        COMMON_PACKAGES + ("openbox", "at-spi2-core", "python3-pyatspi", "xdg-utils", "kalgebra", "texstudio",
                           "texlive-latex-base", "grass-gui"),
        "openbox", base="apt", description="KAlgebra, TeXstudio (+ pdflatex, bibtex), GRASS GIS; AT-SPI on",
        modules=("environments.scienceboard.checkers",),  # /tex/check, /lean/check (probe_routes)
    ),
    # OSWorld's suite on the conventions of its Ubuntu VM (README.md, "The osworld image"): user `user` with
    # password `password` and sudo, `python` with pyautogui, google-chrome (Chromium) with a reachable DevTools
    # port (socat forwards 9222 to it as the tasks ask). VS Code is not in Debian: its tasks stay out.
    "osworld": Variant(
        COMMON_PACKAGES + OSWORLD_APPS + OSWORLD_VM,
        "openbox", base="apt", description="OSWorld's apps Debian packages, its VM's user, sudo, python, google-chrome",
        distributions=("pyautogui",), user_password="password", google_chrome=True, system_pip=True,
    ),
}


@dataclass
class BuildResult:
    image: str
    variant: str
    base_image: str
    base_cached: bool
    image_cached: bool
    timings: dict[str, float] = field(default_factory=dict)
    size_mb: float | None = None


def _run(argv: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-15:]
        raise ScaleCUAError(f"`{' '.join(argv[:3])} ...` failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return proc


def image_exists(engine_cli: str, tag: str) -> bool:
    argv = [engine_cli, "image", "exists", tag] if engine_cli == "podman" else [engine_cli, "image", "inspect", tag]
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def _digest(items: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for item in items:
        h.update(len(item).to_bytes(8, "big"))
        h.update(item)
    return h.hexdigest()


# ---------------------------------------------------------------------------
# Stage 1: the Debian base filesystem
# ---------------------------------------------------------------------------


def sources(suite: str, mirror: str, security_mirror: str) -> list[str]:
    return [f"deb {mirror} {suite} main", f"deb {mirror} {suite}-updates main",
            f"deb {security_mirror} {suite}-security main"]


def mmdebstrap_argv(variant: Variant, suite: str, mirror: str, security_mirror: str) -> list[str]:
    argv = ["mmdebstrap", f"--variant={variant.base}", "--format=tar", "--include=" + ",".join(variant.packages),
            "--dpkgopt=force-unsafe-io", "--aptopt=Acquire::Retries \"3\""]
    argv += [f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES]
    argv += [f"--dpkgopt=path-include={p}" for p in DPKG_INCLUDES]
    return [*argv, suite, "-", *sources(suite, mirror, security_mirror)]


def _scratch_dir(need_gb: float) -> str | None:
    """tmpfs for mmdebstrap's unpacking when it has room (dpkg on a slow disk is most of the build)."""
    try:
        if shutil.disk_usage("/dev/shm").free > need_gb * 2**30 and os.access("/dev/shm", os.W_OK):
            return "/dev/shm"
    except OSError:
        pass
    return None


def build_base(name: str, variant: Variant, *, engine_cli: str, suite: str, mirror: str, security_mirror: str,
               force: bool = False) -> tuple[str, bool]:
    """The imported base filesystem's tag, and whether it was cached."""
    argv = mmdebstrap_argv(variant, suite, mirror, security_mirror)
    tag = f"{BASE_REPOSITORY}:{name}-{_digest([BUILDER_VERSION.encode(), json.dumps(argv).encode()])[:12]}"
    if not force and image_exists(engine_cli, tag):
        return tag, True
    problem = rootless_problem()
    if problem:
        raise ScaleCUAError(problem)
    if os.geteuid() != 0:
        argv = ["mmdebstrap", "--mode=unshare", *argv[1:]]  # the auto mode tries root's chroot first
    if shutil.which("mmdebstrap") is None:
        raise ScaleCUAError("mmdebstrap is not installed: `apt-get install mmdebstrap` (it builds the Debian base "
                            "filesystem from Debian packages; no registry is needed)")
    env = dict(os.environ)
    scratch = _scratch_dir(need_gb={"minimal": 1.5, "osworld": 6}.get(name, 4))
    if scratch:
        env["TMPDIR"] = scratch
    log.info("building the base filesystem", variant=name, packages=len(variant.packages), tmpdir=scratch or "default")
    with tempfile.TemporaryFile() as errors:
        strap = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, env=env)
        assert strap.stdout is not None
        importer = subprocess.run([engine_cli, "import", "--message", f"scalecua {name} base", "-", tag],
                                  stdin=strap.stdout, capture_output=True, text=True, check=False)
        strap.stdout.close()
        code = strap.wait()
        if code != 0 or importer.returncode != 0:
            errors.seek(0)
            tail = errors.read().decode(errors="replace").strip().splitlines()[-15:]
            if importer.returncode == 0:
                subprocess.run([engine_cli, "rmi", "-f", tag], capture_output=True, check=False)
            raise ScaleCUAError(f"building the {name} base filesystem failed (mmdebstrap exit {code}, "
                                f"{engine_cli} import exit {importer.returncode}):\n" + "\n".join(tail)
                                + "\n" + importer.stderr.strip()[-1000:])
    return tag, False


# ---------------------------------------------------------------------------
# Stage 2: our probe and its Python packages on top
# ---------------------------------------------------------------------------


def project_files(modules: Sequence[str] = PROBE_MODULES) -> list[Path]:
    """The project's source files that importing ``modules`` loads (core/ and environments/ only)."""
    code = ("import importlib, json, sys\n"
            f"for m in {list(modules)!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted({getattr(m, '__file__', None) or '' for m in list(sys.modules.values())})))")
    out = _run([sys.executable, "-c", code], cwd=REPO_ROOT).stdout
    files = []
    for name in json.loads(out.strip().splitlines()[-1]):
        path = Path(name)
        try:
            relative = path.resolve().relative_to(REPO_ROOT)
        except ValueError:
            continue
        if relative.parts and relative.parts[0] in ("core", "environments") and path.suffix == ".py":
            files.append(relative)
    return sorted(files)


def distribution_closure(roots: Iterable[str]) -> list[metadata.Distribution]:
    """``roots`` and everything they require (markers evaluated for this interpreter, no extras)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, metadata.Distribution] = {}
    pending = list(roots)
    while pending:
        name = canonicalize_name(pending.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ScaleCUAError(f"Python package {name} is not installed here; the image copies it from this "
                                f"environment: `pip install {name}`") from None
        seen[name] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return sorted(seen.values(), key=lambda d: canonicalize_name(d.metadata["Name"]))


def _is_compiled(dist: metadata.Distribution) -> bool:
    return any(str(f).endswith((".so", ".pyd")) for f in dist.files or [])


def copy_distributions(dists: Sequence[metadata.Distribution], site: Path, suite: str) -> None:
    """Copy each distribution's installed files into ``site`` (a directory on the image's PYTHONPATH)."""
    wanted = SUITE_PYTHON.get(suite)
    compiled = [d.metadata["Name"] for d in dists if _is_compiled(d)]
    if compiled and wanted and sys.version_info[:2] != wanted:
        raise ScaleCUAError(
            f"the {suite} image runs Python {wanted[0]}.{wanted[1]} but this is Python "
            f"{sys.version_info[0]}.{sys.version_info[1]}; compiled packages ({', '.join(compiled)}) cannot be "
            f"copied across versions: run the build from a Python {wanted[0]}.{wanted[1]} environment"
        )
    for dist in dists:
        for entry in dist.files or []:
            if entry.parts[0] == ".." or "__pycache__" in entry.parts or entry.suffix == ".pyc":
                continue  # scripts in bin/, caches
            source = Path(str(dist.locate_file(entry)))
            if source.is_file():
                target = site / entry
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


def prepare_context(context: Path, *, containerfile: Path, suite: str,
                    distributions: Iterable[str] = PROBE_DISTRIBUTIONS, modules: Sequence[str] = ()) -> str:
    """Fill ``context`` (Containerfile and the files beside it, app/, site/); returns a hash of everything in it."""
    items = []
    for source in sorted(containerfile.parent.iterdir()):  # the Containerfile and what it COPYs (google-chrome)
        if source.is_file():
            target = context / ("Containerfile" if source == containerfile else source.name)
            shutil.copy2(source, target)
            items += [target.name.encode(), source.read_bytes()]
    for relative in project_files((*PROBE_MODULES, *modules)):
        target = context / "app" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / relative, target)
    dists = distribution_closure(distributions)
    copy_distributions(dists, context / "site", suite)
    for path in sorted((context / "app").rglob("*.py")):
        items += [str(path.relative_to(context)).encode(), path.read_bytes()]
    items += [f"{d.metadata['Name']}=={d.version}".encode() for d in dists]
    return _digest(items)


def build_image(variant_name: str = "full", *, engine_cli: str = "podman", suite: str = "bookworm",
                mirror: str = "http://deb.debian.org/debian", security_mirror: str = "http://deb.debian.org/debian-security",
                runtime: str | None = None, force: bool = False) -> BuildResult:
    """Build (or find cached) the container-desktop image of ``variant_name``."""
    if variant_name not in VARIANTS:
        raise ScaleCUAError(f"unknown image variant {variant_name!r}; available: {', '.join(VARIANTS)}")
    if shutil.which(engine_cli) is None:
        raise ScaleCUAError(f"{engine_cli} is not installed (`apt-get install podman runc`)")
    variant = VARIANTS[variant_name]
    started = time.monotonic()
    base, base_cached = build_base(variant_name, variant, engine_cli=engine_cli, suite=suite, mirror=mirror,
                                   security_mirror=security_mirror, force=force)
    timings = {"base_s": round(time.monotonic() - started, 2)}
    with tempfile.TemporaryDirectory(prefix="scalecua-image-") as scratch:
        context = Path(scratch)
        t0 = time.monotonic()
        digest = prepare_context(context, containerfile=IMAGE_DIR / "Containerfile", suite=suite,
                                 distributions=(*PROBE_DISTRIBUTIONS, *variant.distributions), modules=variant.modules)
        build_args = variant.build_args()
        digest = _digest([digest.encode(), base.encode(), json.dumps(build_args, sort_keys=True).encode()])
        tag = f"{IMAGE_REPOSITORY}:{variant_name}-{digest[:12]}"
        timings["context_s"] = round(time.monotonic() - t0, 2)
        cached = not force and image_exists(engine_cli, tag)
        if not cached:
            t1 = time.monotonic()
            build_from_context(context, tag, engine_cli=engine_cli, runtime=runtime,
                               build_args={"BASE": base, **build_args},
                               labels={"org.scalecua.variant": variant_name, "org.scalecua.hash": digest})
            timings["image_s"] = round(time.monotonic() - t1, 2)
    _run([engine_cli, "tag", tag, f"{IMAGE_REPOSITORY}:{variant_name}"])
    timings["total_s"] = round(time.monotonic() - started, 2)
    size = subprocess.run([engine_cli, "image", "inspect", "--format", "{{.Size}}", tag], capture_output=True, text=True,
                          check=False)
    size_mb = round(int(size.stdout.strip()) / 2**20, 1) if size.stdout.strip().isdigit() else None
    result = BuildResult(tag, variant_name, base, base_cached, cached, timings, size_mb)
    log.info("image ready", **{k: v for k, v in asdict(result).items() if k != "timings"}, **timings)
    return result


def build_from_context(context: Path, tag: str, *, engine_cli: str = "podman", runtime: str | None = None,
                       build_args: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> None:
    """``podman build`` (or docker) of ``context/Containerfile`` with the ulimits this machine allows."""
    argv = [engine_cli, "build", "--file", str(context / "Containerfile"), "--tag", tag]
    if engine_cli == "podman":
        argv += ["--runtime", runtime or "runc"] if (runtime or shutil.which("runc")) else []
    argv += [f"--ulimit={u}" for u in ULIMITS]
    for key, value in (build_args or {}).items():
        argv += ["--build-arg", f"{key}={value}"]
    for key, value in (labels or {}).items():
        argv += ["--label", f"{key}={value}"]
    _run([*argv, str(context)])


def main(argv: Sequence[str] | None = None) -> int:
    from core.runtime import logs

    parser = argparse.ArgumentParser(prog="python -m environments.containers.build", description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="full", choices=sorted(VARIANTS), help="which applications (default full)")
    parser.add_argument("--engine", default="podman", choices=["podman", "docker"], help="CLI that imports and builds")
    parser.add_argument("--suite", default="bookworm", help="Debian suite (default bookworm)")
    parser.add_argument("--mirror", default="http://deb.debian.org/debian")
    parser.add_argument("--security-mirror", default="http://deb.debian.org/debian-security")
    parser.add_argument("--runtime", default=None, help="OCI runtime for RUN steps (podman; default runc if present)")
    parser.add_argument("--force", action="store_true", help="rebuild even when the cached stages match")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = parser.parse_args(argv)
    logs.configure("warning" if args.json else "info")
    result = build_image(args.variant, engine_cli=args.engine, suite=args.suite, mirror=args.mirror,
                         security_mirror=args.security_mirror, runtime=args.runtime, force=args.force)
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        state = "cached" if result.image_cached else "built"
        print(f"{result.image} ({state}; base {result.base_image}, {result.timings['total_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    from core.commands.cli import main_guard

    sys.exit(main_guard(main))
