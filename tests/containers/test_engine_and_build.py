"""Engine hosts (podman's API served for a run where no engine runs), ownership labels, options and the image
build's inputs (no containers started here)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from core.errors import ScaleCUAError
from core.pluginmanager import Plugins
from environments.containers import build, engine
from environments.containers.container_desktop import ContainerDesktopBackend, ContainerDesktopOptions
from environments.containers.engine import Engine, EngineError, EngineHost
from environments.containers.osworld_docker import OSWorldDockerOptions
from environments.containers.podman_service import PodmanService


def test_both_backends_are_registered_with_their_options(plugins: Plugins) -> None:
    registry = plugins.registry("environment")
    assert {"container-desktop", "osworld-docker"} <= set(registry.names())
    options = registry.get("container-desktop").parse_options({"hosts": ["unix:///run/x.sock"], "warm": 3})
    assert isinstance(options, ContainerDesktopOptions)
    assert options.hosts == [EngineHost(url="unix:///run/x.sock")] and options.warm == 3
    osworld = registry.get("osworld-docker").parse_options({})
    assert isinstance(osworld, OSWorldDockerOptions)
    assert (osworld.ram_size, osworld.cpu_cores, osworld.disk_size, osworld.startup_timeout_s) == ("4G", 4, "32G", 300)


def test_options_reject_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="max_enviroments"):
        ContainerDesktopOptions.model_validate({"max_enviroments": 3})


def test_host_access_defaults() -> None:
    local = EngineHost(url="unix:///run/podman/podman.sock")
    remote = EngineHost(url="ssh://ops@gpu-7")
    assert (local.resolved_access, local.published_address) == ("container_ip", "127.0.0.1")
    assert (remote.resolved_access, remote.published_address) == ("published", "gpu-7")
    assert EngineHost(url="tcp://10.0.0.5:2375", address="192.168.1.5").published_address == "192.168.1.5"


def test_default_host_comes_from_docker_host_or_an_existing_socket(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    configured = [EngineHost(url="ssh://ops@gpu-7")]
    assert engine.engine_hosts(configured) == (configured, None)
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.1.2.3:2375")
    assert engine.engine_hosts([]) == ([EngineHost(url="tcp://10.1.2.3:2375")], None)
    monkeypatch.delenv("DOCKER_HOST")
    (tmp_path / "podman.sock").touch()
    monkeypatch.setattr(engine, "DEFAULT_SOCKETS", ("/nonexistent/podman.sock", str(tmp_path / "podman.sock")))
    assert engine.engine_hosts([]) == ([EngineHost(url=f"unix://{tmp_path}/podman.sock")], None)


def test_without_an_engine_or_podman_the_error_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine, "DEFAULT_SOCKETS", ("/nonexistent/podman.sock",))
    monkeypatch.setenv("PATH", str(tmp_path))  # no podman on it
    with pytest.raises(ScaleCUAError, match="no container engine found") as raised:
        engine.engine_hosts([])
    message = str(raised.value)
    assert "apt-get install podman" in message
    assert "`mkdir -p /run/podman && podman system service --time=0 unix:///run/podman/podman.sock &`" in message


needs_podman = pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed")


@pytest.mark.containers
@needs_podman
def test_without_an_engine_socket_podmans_api_is_served_for_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine, "DEFAULT_SOCKETS", ("/nonexistent/podman.sock",))
    hosts, service = engine.engine_hosts([], runtime="runc")
    assert service is not None and service.process is not None
    try:
        assert hosts == [EngineHost(url=service.url)] and service.socket_path.parent.stat().st_mode & 0o777 == 0o700
        connected = Engine(hosts[0], timeout_s=30).open()
        assert connected.kind == "podman"
        connected.close()
    finally:
        service.stop()
    assert service.process.poll() is not None and not service.socket_path.parent.exists()


@pytest.mark.containers
@needs_podman
def test_the_command_the_messages_give_starts_the_socket_in_a_missing_folder(tmp_path: Path) -> None:
    socket_path = tmp_path / "run" / "podman" / "podman.sock"  # as /run/podman on a fresh machine: not there yet
    # the command as given, in a shell of its own process group (stopped as a whole afterwards)
    shell = subprocess.Popen(["bash", "-c", engine.start_socket_command(str(socket_path)) + " wait"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not socket_path.exists() and time.monotonic() < deadline and shell.poll() is None:
            time.sleep(0.05)
        assert Engine(EngineHost(url=f"unix://{socket_path}"), timeout_s=30).open().kind == "podman"
    finally:
        os.killpg(shell.pid, signal.SIGTERM)
        shell.wait(30)


@pytest.mark.containers
@needs_podman
def test_a_backend_stops_the_podman_api_it_served_when_it_closes_or_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine, "DEFAULT_SOCKETS", ("/nonexistent/podman.sock",))
    served: list[PodmanService] = []
    private = PodmanService.private

    def remembered(**kwargs: Any) -> PodmanService:
        served.append(private(**kwargs))
        return served[-1]

    monkeypatch.setattr(PodmanService, "private", remembered)

    class AnyImage(ContainerDesktopBackend):
        def preflight(self, engine: Engine) -> None:  # no image: this test is about the engine's lifetime
            pass

    backend = AnyImage(ContainerDesktopOptions(warm=0, runtime="runc"))
    assert backend.podman_service is served[0] and [e.url for e in backend.engines] == [served[0].url]
    assert backend.engines[0].kind == "podman"
    asyncio.run(backend.close())
    with pytest.raises(ScaleCUAError, match="is not on the container engine"):
        ContainerDesktopBackend(ContainerDesktopOptions(image="localhost/scalecua/absent:none", warm=0, runtime="runc"))
    assert len(served) == 2
    for service in served:
        assert service.process is not None and service.process.poll() is not None
        assert not service.socket_path.parent.exists()


def test_an_unreachable_engine_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"unreachable.*podman system service --time=0"):
        Engine(EngineHost(url=f"unix://{tmp_path}/absent.sock"), timeout_s=5).open()


def test_owner_labels_name_live_processes_only() -> None:
    assert not engine.owner_is_gone(engine.owner_label())
    child = subprocess.Popen([sys.executable, "-c", "import os, sys; print(open(f'/proc/{os.getpid()}/stat').read())"],
                             stdout=subprocess.PIPE, text=True)
    stat = child.communicate()[0]
    ticks = stat.rsplit(")", 1)[1].split()[19]
    label = f"{engine.socket.gethostname()}:{child.pid}:{ticks}"
    assert engine.owner_is_gone(label)  # that process has exited
    assert not engine.owner_is_gone(f"another-machine:{child.pid}:{ticks}")  # not ours to judge
    assert not engine.owner_is_gone("garbage")


def test_base_filesystem_command_installs_the_variant_without_docs() -> None:
    argv = build.mmdebstrap_argv(build.VARIANTS["minimal"], "bookworm", "http://mirror/debian", "http://sec/debian")
    include = next(a for a in argv if a.startswith("--include="))
    assert {"xvfb", "xterm", "mousepad", "python3", "matchbox-window-manager"} <= set(include[10:].split(","))
    assert "--dpkgopt=path-exclude=/usr/share/doc/*" in argv and "--format=tar" in argv
    assert argv[-4:] == ["-", "deb http://mirror/debian bookworm main", "deb http://mirror/debian bookworm-updates main",
                         "deb http://sec/debian bookworm-security main"]
    full = build.VARIANTS["full"]
    assert {"libreoffice-calc", "libreoffice-writer", "chromium", "openbox"} <= set(full.packages)


def test_the_image_gets_exactly_the_probe_closure() -> None:
    files = {str(p) for p in build.project_files()}
    assert {"environments/probe/routes.py", "environments/display.py", "environments/containers/inside.py",
            "core/types.py"} <= files
    assert not any(f.startswith(("environments/tasks", "environments/judges", "plugins/")) for f in files)
    names = {d.metadata["Name"].lower().replace("_", "-") for d in build.distribution_closure(build.PROBE_DISTRIBUTIONS)}
    assert {"pydantic", "pydantic-core", "annotated-types", "typing-extensions", "structlog", "numpy", "mss",
            "pluggy"} <= names
    assert "torch" not in names and "docker" not in names


def test_compiled_packages_are_not_copied_across_python_versions(tmp_path: Path) -> None:
    numpy = build.distribution_closure(["numpy"])
    with pytest.raises(ScaleCUAError, match=r"runs Python 3\.13 .*compiled packages \(numpy\)"):
        build.copy_distributions(numpy, tmp_path, "trixie")
    build.copy_distributions(numpy, tmp_path, "bookworm")
    assert (tmp_path / "numpy" / "__init__.py").is_file()


def test_unknown_variant_and_missing_packages_are_messages() -> None:
    with pytest.raises(ScaleCUAError, match="unknown image variant 'huge'; available: full, minimal"):
        build.build_image("huge")
    with pytest.raises(ScaleCUAError, match="no-such-dist-xyz is not installed here"):
        build.distribution_closure(["no-such-dist-xyz"])


def test_podmans_default_rlimits_are_fitted_to_this_machine_or_the_config_named(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    from environments.containers import podman_service

    hard = {resource.RLIMIT_NOFILE: 20000, resource.RLIMIT_NPROC: 8000}
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, hard[which]))
    monkeypatch.setattr(podman_service, "SYSTEM_CONF", tmp_path / "absent.conf")
    monkeypatch.delenv("CONTAINERS_CONF", raising=False)
    conf = podman_service.fitted_ulimits_conf(tmp_path)
    assert conf is not None
    assert conf.read_text() == '[containers]\ndefault_ulimits = ["nofile=4096:4096", "nproc=8000:8000"]\n'
    monkeypatch.setenv("CONTAINERS_CONF", str(tmp_path / "mine.conf"))  # the user's own file is never replaced
    with pytest.raises(ScaleCUAError, match=r'add `default_ulimits = \["nofile=4096:4096", "nproc=8000:8000"\]` '
                                            r'under \[containers\] in .*mine.conf'):
        podman_service.fitted_ulimits_conf(tmp_path)
    hard[resource.RLIMIT_NOFILE] = podman_service.PODMAN_DEFAULT_NOFILE  # podman's defaults fit: nothing to write
    assert podman_service.fitted_ulimits_conf(tmp_path) is None
