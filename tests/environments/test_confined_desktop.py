"""A trainer running as root gives the agent an unprivileged desktop (environments/desktop_user.py).

Real Xvfb desktops through the local-desktop backend with its default options, as a root trainer (CI) runs
them: the commands the probe runs, the apps it launches and therefore the agent's shell belong to the
desktop user, who cannot read /root, write /etc or reach the run directory, and never sees the probe's token.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import tempfile
from pathlib import Path

import pytest

from core.errors import ScaleCUAError
from core.types import Action, ActionType, Task
from environments.display import tagged_processes
from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions

pytestmark = [pytest.mark.desktop,
              pytest.mark.skipif(os.geteuid() != 0, reason="confinement applies when the trainer runs as root")]


def process_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def test_the_agent_shell_cannot_touch_the_host() -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="scalecua-run-"))
    run_dir.chmod(0o755)
    (run_dir / "checkpoint.bin").write_text("the trainer's")

    async def body() -> dict[str, dict]:
        backend = LocalDesktopBackend(LocalDesktopOptions(max_environments=1, settle_s=0.1), run_dir=run_dir)
        assert backend.user is not None and backend.user.name == "scalecua-desktop"
        env = await backend.acquire()
        try:
            await env.reset(Task.model_validate({"id": "t", "instruction": "x", "evaluator": {"func": "infeasible"},
                                                 "config": [{"type": "launch",
                                                             "parameters": {"command": ["xterm", "-T", "agent"]}}]}))
            results = {}
            for name, command in {
                "uid": "id -u",
                "root_home": "ls /root",
                "etc": "touch /etc/scalecua-was-here",
                "run_dir": f"ls {run_dir}",
                "checkpoint": f"cat {run_dir}/checkpoint.bin",
                "home": "echo mine > ~/note.txt && stat -c %U ~ ~/note.txt",
                "token": "env | grep -c SCALECUA_PROBE_TOKEN || true",
            }.items():
                results[name] = await env.client.execute(command, shell=True, timeout=30)
            xterms = [pid for pid in tagged_processes(env.env_id)
                      if b"xterm" in Path(f"/proc/{pid}/cmdline").read_bytes()]
            results["xterm_uids"] = {"uids": sorted({process_uid(pid) for pid in xterms})}
            return results
        finally:
            await backend.release(env, discard=True)
            await backend.close()
            # the temporary desktops directory goes with the backend (bench/faults.py found it left behind)
            assert not backend.work_dir.exists(), backend.work_dir

    results = asyncio.run(body())
    uid = pwd.getpwnam("scalecua-desktop").pw_uid
    assert uid != 0 and results["uid"]["output"].strip() == str(uid)
    assert results["xterm_uids"]["uids"] == [uid]  # the agent's terminal
    for denied in ("root_home", "etc", "run_dir", "checkpoint"):
        assert results[denied]["returncode"] != 0 and "Permission denied" in results[denied]["error"], denied
    assert results["home"]["returncode"] == 0 and results["home"]["output"].split() == ["scalecua-desktop"] * 2
    assert results["token"]["output"].strip() == "0"
    assert (run_dir / "checkpoint.bin").read_text() == "the trainer's" and oct(run_dir.stat().st_mode)[-3:] == "700"


def test_what_the_probe_writes_for_the_desktop_belongs_to_its_user_and_goes_only_where_it_may(tmp_path: Path) -> None:
    """Setup files land owned by the desktop user (its apps save over them); the agent's write_file action
    cannot write where its own shell could not (the probe itself stays root)."""
    asset = tmp_path / "sheet.csv"  # under pytest's 0700 directory: only the probe's own rights read it
    asset.write_text("a,b\n")

    async def body() -> tuple[list, dict]:
        backend = LocalDesktopBackend(LocalDesktopOptions(max_environments=1, settle_s=0.1))
        env = await backend.acquire()
        try:
            await env.reset(Task.model_validate({
                "id": "t", "instruction": "x", "evaluator": {"func": "infeasible"},
                "config": [{"type": "download", "parameters": {"files": [
                    {"url": asset.as_uri(), "path": "~/Desktop/sheet.csv"}]}}]}))
            await env.step(Action(type=ActionType.WRITE_FILE, path="~/notes/a.txt", content="hi"))
            observation = await env.step(Action(type=ActionType.WRITE_FILE, path="/etc/scalecua-agent", content="x"))
            owners = await env.client.execute("stat -c %U ~/Desktop/sheet.csv ~/notes ~/notes/a.txt", shell=True,
                                              timeout=30)
            return owners["output"].split(), observation.info
        finally:
            await backend.release(env, discard=True)
            await backend.close()

    owners, info = asyncio.run(body())
    assert owners == ["scalecua-desktop"] * 3
    assert "Permission denied" in str(info.get("action_error")) and not Path("/etc/scalecua-agent").exists()


def test_a_work_dir_the_desktop_user_cannot_reach_is_refused(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(ScaleCUAError, match="cannot reach .*set work_dir to a directory it can reach"):
        LocalDesktopBackend(LocalDesktopOptions(work_dir=str(closed / "envs")))


def test_desktop_user_null_runs_desktops_as_the_trainer() -> None:
    backend = LocalDesktopBackend(LocalDesktopOptions(desktop_user=None, max_environments=1))
    assert backend.user is None
