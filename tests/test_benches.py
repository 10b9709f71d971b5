"""Every benchmark's ``--quick`` run on this machine, as CI runs it: exit 0, and one JSON object on stdout that
states the machine and the settings (``bench/gpu_check.py`` needs a GPU: bench/gpu_check.sh runs it there).

Each bench is its own case, so a broken one is named; the quick modes take under a minute each (the suite's
budget: README, Development). The benches whose code path depends on the user run again as an unprivileged user
(``nobody``) from a copy of the checkout that user owns, where the machine allows it (root to drop privileges, an
interpreter that user may run)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEEDS_A_GPU = {"gpu_check"}
BENCHES = sorted(p for p in (ROOT / "bench").glob("*.py") if p.stem not in NEEDS_A_GPU)


def test_every_bench_is_covered() -> None:
    assert len(BENCHES) >= 14 and all("--quick" in p.read_text() for p in BENCHES)


@pytest.mark.slow
@pytest.mark.desktop
@pytest.mark.parametrize("bench", BENCHES, ids=lambda p: p.stem)
def test_quick_mode_prints_one_json_object_with_machine_and_settings(bench: Path) -> None:
    proc = subprocess.run([sys.executable, str(bench), "--quick"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, f"{bench.name} --quick exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{bench.name} --quick did not print one JSON object on stdout ({exc}): {proc.stdout[:500]!r}")
    assert isinstance(result, dict)
    assert result.get("machine"), f"{bench.name}: no machine in its JSON (keys: {sorted(result)})"
    assert "settings" in result, f"{bench.name}: no settings in its JSON (keys: {sorted(result)})"


# -- as an unprivileged user ------------------------------------------------------------------------------------
#: the benches whose code path depends on who runs them: desktops started as the user instead of a confined
#: desktop user, the judge sandbox's user namespace without root, the recipe's run directories, VeriGen's
#: desktops and task store, rootless containers
AS_USER = ("environment", "judges", "learning", "verigen", "containers")
USER = "nobody"


def as_user(argv: list[str], cwd: Path, home: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    user = pwd.getpwnam(USER)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "PYTHONPATH": str(cwd),
           "PYTHONUNBUFFERED": "1", "LANG": "C.UTF-8"}
    return subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
                           "env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def unprivileged_checkout():
    """(python, checkout, home) for USER: a copy of this checkout (its tracked and untracked, not ignored files)
    that USER owns, as a user's own clone would be, and a venv of an interpreter USER can run with this
    environment's packages on its path (nothing downloaded)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("running benches as an unprivileged user needs root (to drop to it) and setpriv")
    try:
        user = pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no user {USER!r} on this machine")
    where = Path(tempfile.mkdtemp(prefix="bench-unprivileged-", dir="/tmp"))
    try:
        checkout, home = where / "checkout", where / "home"
        home.mkdir()
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                               check=True).stdout.decode().split("\0")
        for name in filter(None, files):
            if (ROOT / name).is_file():
                (checkout / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, checkout / name)
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        reachable = [c for c in dict.fromkeys([sys._base_executable, f"/usr/bin/{version}"])
                     if Path(c).exists() and as_user([c, "-c", "pass"], cwd=where, home=home).returncode == 0]
        if not reachable:  # e.g. an interpreter under /root (mode 0700)
            pytest.skip(f"no {version} interpreter here that {USER} may run ({sys._base_executable} is not)")
        venv = where / "venv"
        subprocess.run([reachable[0], "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next(venv.glob("lib/python*/site-packages"))
        (site / "scalecua-test-dependencies.pth").write_text(
            "\n".join(sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})) + "\n")
        subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(where)], check=True)
        where.chmod(0o755)
        yield venv / "bin" / "python", checkout, home
    finally:
        shutil.rmtree(where, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.desktop
@pytest.mark.parametrize("name", AS_USER)
def test_quick_mode_as_an_unprivileged_user(name: str, unprivileged_checkout) -> None:
    python, checkout, home = unprivileged_checkout
    proc = as_user([str(python), f"bench/{name}.py", "--quick"], cwd=checkout, home=home)
    if name == "containers":
        problem = as_user([str(python), "-c", "from environments.containers.rootless import rootless_problem; "
                           "print(rootless_problem() or '')"], cwd=checkout, home=home).stdout.strip()
        if problem:  # no subordinate ids for the user: one clear error before anything starts, no traceback
            assert proc.returncode == 2 and proc.stderr.strip() == f"error: {problem}", proc.stderr[-3000:]
            assert "subuid grants" in problem and "usermod --add-subuids" in problem, problem
            return
    assert proc.returncode == 0, f"{name}.py --quick as {USER} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    result = json.loads(proc.stdout)
    assert result.get("machine") and "settings" in result, sorted(result)
