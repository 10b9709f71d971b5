"""The built wheel works outside the repository.

``python -m build`` makes an sdist and, from it, a wheel (as a release would). The wheel goes into a fresh
virtual environment in a temporary directory; its third-party dependencies come from the test's own
environment through a ``.pth`` line (a plain path: the checkout's editable-install hook in there is never
activated), so nothing is downloaded and nothing of the checkout is importable. Run from another directory,
the installed package must provide every entry point, the bundled tasks and configs, the files a container
image build needs, list every component, validate the quickstart by its packaged name and prove a bundled
task's oracle on a real desktop.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
IGNORED = shutil.ignore_patterns(".git", ".venv", "runs", "__pycache__", "*.egg-info", "build", "dist",
                                 ".pytest_cache", ".hypothesis", "bench")

pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path, **kwargs) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900, **kwargs)
    assert proc.returncode == 0, f"{' '.join(argv)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh environment's python, a working directory outside the checkout)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    shutil.copytree(REPO, source, ignore=IGNORED)  # the build writes egg-info next to the sources
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(root / "dist"), str(source)], cwd=root)
    wheels = sorted((root / "dist").glob("scalecua-*.whl"))
    assert len(wheels) == 1 and sorted((root / "dist").glob("scalecua-*.tar.gz")), sorted((root / "dist").iterdir())
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
          str(wheels[0])], cwd=root)
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=root).stdout.strip())
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = root / "elsewhere"
    work.mkdir()
    return python, work


def test_packages_come_from_the_wheel_not_the_checkout(installed: tuple[Path, Path]) -> None:
    python, work = installed
    code = ("import json, core, configs, environments, plugins, samplers, segmenters, trainers; "
            "print(json.dumps([m.__file__ for m in (core, configs, environments, plugins, samplers, segmenters, "
            "trainers)]))")
    files = json.loads(_run([str(python), "-c", code], cwd=work).stdout)
    assert all("site-packages" in f and not f.startswith(str(REPO)) for f in files), files


def test_every_entry_point_and_component_is_there(installed: tuple[Path, Path]) -> None:
    python, work = installed
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["scalecua"]
    code = ("import json, importlib.metadata as m; "
            "print(json.dumps({e.name: e.value for e in m.entry_points(group='scalecua')}))")
    assert json.loads(_run([str(python), "-c", code], cwd=work).stdout) == declared
    here = _run([sys.executable, "-m", "core.plugins"], cwd=REPO).stdout
    there = _run([str(python), "-m", "core.plugins"], cwd=work).stdout
    assert there == here and "local-desktop" in there and "frontier" in there


def test_bundled_tasks_configs_and_image_files_are_packaged(installed: tuple[Path, Path]) -> None:
    python, work = installed
    code = """
import importlib.resources as r, json
from pathlib import Path
from environments.containers.build import PROBE_MODULES
osworld = r.files("environments.tasks") / "osworld"
science = r.files("environments.scienceboard") / "tasks"
image = r.files("environments.containers") / "image"
def files(root):
    root = Path(str(root))  # pip compiles what it installs: __pycache__ is not the package's
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
print(json.dumps({
    "osworld": files(osworld),
    "scienceboard": files(science),
    "containerfile": (image / "Containerfile").is_file(),
    "probe_modules": [m for m in PROBE_MODULES if not __import__("importlib.util").util.find_spec(m)],
}))
"""
    got = json.loads(_run([str(python), "-c", code], cwd=work).stdout)

    def files(directory: Path) -> list[str]:
        return sorted(str(p.relative_to(directory)) for p in directory.rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")

    assert got["osworld"] == files(REPO / "environments/tasks/osworld")
    assert got["scienceboard"] == files(REPO / "environments/scienceboard/tasks")
    assert got["containerfile"] and got["probe_modules"] == []
    listing = _run([str(python), "-m", "configs"], cwd=work).stdout.splitlines()
    names = {line.split()[0]: line.split()[1] for line in listing}
    assert set(names) == {p.stem for p in (REPO / "configs").glob("*.yaml")}
    assert all("site-packages" in path for path in names.values())


def test_the_quickstart_validates_by_its_packaged_name(installed: tuple[Path, Path]) -> None:
    python, work = installed
    proc = _run([str(python), "-m", "core.run", "--config", "quickstart", "--dry-run", "run.output_dir=runs"],
                cwd=work)
    assert any((work / "runs").glob("quickstart-*")), proc.stderr[-2000:]
    wrong = subprocess.run([str(python), "-m", "core.run", "--config", "quikstart", "--dry-run"], cwd=work,
                           capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 2 and "packaged configs: " in wrong.stderr and "quickstart" in wrong.stderr


@pytest.mark.desktop
def test_a_bundled_task_is_proved_on_a_real_desktop_from_the_wheel(installed: tuple[Path, Path]) -> None:
    python, work = installed
    proc = _run([str(python), "-m", "core.envcheck", "--tasks", "os-count-lines", "--workers", "1", "--json"],
                cwd=work)
    report = json.loads(proc.stdout)
    assert (report["tasks"], report["passed"], report["failed"]) == (1, 1, []), proc.stderr[-2000:]
    assert report["results"][0]["task_id"] == "os-count-lines" and report["results"][0]["ok"]
