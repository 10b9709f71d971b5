"""``python -m core.envcheck --judge-only [--mirror DIR]``: reset each task, judge the untouched state (it must
score 0), per-domain counts; http(s) task files served from the backends' download mirror, absent ones reported
as files missing.

The desktop tests run real local desktops (Xvfb, openbox, the probe) and the real judge; URLs point at a
loopback port nothing listens on, so a download that went to the network instead of the mirror fails at once.
"""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path
from typing import Any

import pytest

from core.commands import envcheck
from core.commands.cli import main_guard
from core.errors import ConfigError, FilesMissing
from core.interfaces import JudgeServices
from core.pluginmanager import load_plugins
from core.runtime.tasks import load_tasks
from core.types import Task
from environments.containers.container_desktop import ContainerDesktopBackend, ContainerDesktopOptions
from environments.judges import getters
from environments.judges.evaluate import EvaluationEnv, evaluate
from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions
from environments.mirror import mirror_files, mirror_path
from environments.setup import SetupContext, SetupError
from tests.environments.desktops import closed_port, one_desktop

BACKEND = {"settle_s": 0.1, "desktop_user": None}


def backend_options(tmp_path: Path) -> str:
    return json.dumps({**BACKEND, "work_dir": str(tmp_path / "envs")})


def download_task(base: str, task_id: str = "mirror-download", folder: str = "data") -> dict[str, Any]:
    """Downloads a report into the desktop; judged against a gold file (``cloud_file``) that differs from it."""
    return {
        "id": task_id, "snapshot": "os", "instruction": "Correct the report on the Desktop.",
        "config": [{"type": "download", "parameters": {"files": [
            {"url": f"{base}/{folder}/report%20v1.txt?download=true", "path": "~/Desktop/report v1.txt"}]}}],
        "evaluator": {
            "func": "compare_text_file",
            "result": {"type": "vm_file", "path": "~/Desktop/report v1.txt", "dest": "report.txt"},
            "expected": {"type": "cloud_file", "path": f"{base}/gold/expected.txt", "dest": "expected.txt"},
        },
        "metadata": {"domain": "files"},
    }


def write_suite(root: Path, *tasks: dict[str, Any]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        (root / f"{task['id']}.json").write_text(json.dumps(task))
    return root


# -- the mirror's layout, the backends' option, the cloud_file getter (no desktop) ------------------


def test_mirror_layout_is_host_then_decoded_path_without_port_or_query(tmp_path: Path) -> None:
    url = "https://huggingface.co:443/datasets/x/resolve/main/calc/Order_Sales_Serial%23.xlsx?download=true#top"
    expected = tmp_path / "huggingface.co/datasets/x/resolve/main/calc/Order_Sales_Serial#.xlsx"
    assert mirror_path(tmp_path, url) == expected
    for bad in ("https://host.example/a/../../etc/passwd", "https://host.example/", "https:///no-host.txt",
                "https://host.example/a%2F..%2Fb"):
        with pytest.raises(ValueError, match="names no file a download mirror can hold"):
            mirror_path(tmp_path, bad)


def test_one_files_missing_names_each_absent_file_once(tmp_path: Path) -> None:
    (tmp_path / "h.example" / "a").mkdir(parents=True)
    (tmp_path / "h.example" / "a" / "here.txt").write_text("x")
    here, gone = "https://h.example/a/here.txt", "https://h.example/a/gone.txt"
    assert mirror_files(tmp_path, [here]) == [tmp_path / "h.example/a/here.txt"]
    with pytest.raises(FilesMissing) as info:
        mirror_files(tmp_path, [here, gone, "http://h.example/a/gone.txt", gone])
    assert info.value.urls == [gone, "http://h.example/a/gone.txt"] and info.value.mirror == tmp_path
    assert f"{gone} (expected at {tmp_path / 'h.example/a/gone.txt'})" in str(info.value)
    # a setup context reads through the mirror; other schemes are the host's files, not the mirror's
    context = SetupContext(download_mirror=tmp_path)
    assert context.mirrored([here, "file:///etc/hostname"]) == [tmp_path / "h.example/a/here.txt", None]
    assert SetupContext().mirrored([gone]) == [None]


def test_a_download_mirror_that_is_not_a_directory_fails_the_backend(tmp_path: Path) -> None:
    absent = tmp_path / "no-such-dir"
    with pytest.raises(ConfigError, match=f"local-desktop: download mirror {absent} is not a directory: create "
                                          "it and put each file at <mirror>/<host>/<url path"):
        LocalDesktopBackend(LocalDesktopOptions(download_mirror=str(absent), work_dir=str(tmp_path / "envs")))
    with pytest.raises(ConfigError, match=f"container-desktop: download mirror {absent} is not a directory"):
        ContainerDesktopBackend(ContainerDesktopOptions(download_mirror=str(absent)))
    (tmp_path / "a-file").write_text("x")
    registry = load_plugins(environ={}).registry("environment")
    with pytest.raises(ConfigError, match="download mirror .*a-file is not a directory"):  # passed to its desktops
        registry.create("scienceboard", {"download_mirror": str(tmp_path / "a-file")})


def test_cloud_file_reads_gold_files_from_the_mirror(tmp_path: Path) -> None:
    base = f"https://127.0.0.1:{closed_port()}"  # the network would refuse at once
    mirror = tmp_path / "mirror"
    (mirror / "127.0.0.1" / "gold").mkdir(parents=True)
    (mirror / "127.0.0.1" / "gold" / "expected.txt").write_text("revenue: 13\n")
    (tmp_path / "answer.txt").write_text("revenue: 13\n")
    desktop = types.SimpleNamespace(client=None, setup_context=lambda task=None: SetupContext(download_mirror=mirror))
    task = Task(id="gold", instruction="-", evaluator={
        "func": "compare_text_file", "result": {"type": "cloud_file", "path": (tmp_path / "answer.txt").as_uri()},
        "expected": {"type": "cloud_file", "path": f"{base}/gold/expected.txt?download=1", "dest": "gold.txt"}})
    (cache := tmp_path / "cache").mkdir()
    fetched = asyncio.run(getters.get_cloud_file(EvaluationEnv(desktop, task, cache), task.evaluator.expected))
    assert fetched == str(cache / "gold.txt") and Path(fetched).read_text() == "revenue: 13\n"

    judge = JudgeServices.of(load_plugins(environ={}))
    assert asyncio.run(evaluate(task, desktop, judge=judge, last_action=None)).score == 1.0  # type: ignore[arg-type]
    # a gold file the mirror lacks: FilesMissing, which the judgement records
    missing = task.model_copy(update={"evaluator": task.evaluator.model_copy(update={
        "expected": {"type": "cloud_file", "path": f"{base}/gold/absent.txt"}})})
    with pytest.raises(FilesMissing):
        asyncio.run(getters.get_cloud_file(EvaluationEnv(desktop, missing, cache), missing.evaluator.expected))
    judgement = asyncio.run(evaluate(missing, desktop, judge=judge, last_action=None))  # type: ignore[arg-type]
    assert judgement.status.value == "crashed" and judgement.score == 0.0
    assert judgement.details["files_missing"] == [f"{base}/gold/absent.txt"]
    assert judgement.details["mirror"] == str(mirror)


# -- the command line ---------------------------------------------------------------------------------


def test_a_mirror_that_is_not_a_directory_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main_guard(envcheck.main, ["--judge-only", "--mirror", str(tmp_path / "no-such-dir"),
                                      "--tasks", "os-count-lines"]) == 2
    err = capsys.readouterr().err
    assert f"download mirror {tmp_path / 'no-such-dir'} is not a directory" in err
    assert "<mirror>/<host>/<url path" in err


@pytest.mark.desktop
def test_files_the_mirror_lacks_are_reported_as_missing_not_failed(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    base = f"https://127.0.0.1:{closed_port()}"
    # no setup file: the reset fails; the setup file but no gold file: the judge fails
    suite = write_suite(tmp_path / "suite", download_task(base, "setup-file-missing", folder="absent"),
                        download_task(base, "gold-file-missing"))
    mirror = tmp_path / "mirror"
    (mirror / "127.0.0.1" / "data").mkdir(parents=True)
    (mirror / "127.0.0.1" / "data" / "report v1.txt").write_text("quarterly report\n")
    argv = ["--judge-only", "--path", str(suite), "--mirror", str(mirror), "--workers", "1",
            "--backend-options", backend_options(tmp_path)]
    assert envcheck.main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["failed"] == [] and report["passed"] == 0 and report["mirror"] == str(mirror.resolve())
    assert sorted(report["files_missing"]) == ["gold-file-missing", "setup-file-missing"]
    assert report["domains"] == {"files": {"tasks": 2, "reset_ok": 1, "judge_ok": 0, "score_0": 0,
                                           "files_missing": 2, "failed": 0}}
    results = {r["task_id"]: r for r in report["results"]}
    setup = results["setup-file-missing"]
    assert (setup["outcome"], setup["reset_ok"]) == ("files_missing", False)
    assert setup["files_missing"] == [f"{base}/absent/report%20v1.txt?download=true"]
    assert str(mirror.resolve() / "127.0.0.1" / "absent" / "report v1.txt") in setup["error"]
    gold = results["gold-file-missing"]
    assert (gold["outcome"], gold["reset_ok"], gold["status_before"]) == ("files_missing", True, "crashed")
    assert gold["files_missing"] == [f"{base}/gold/expected.txt"]

    assert envcheck.main(argv) == 0  # the text report
    out = capsys.readouterr().out
    assert "MISS setup-file-missing" in out and "MISS gold-file-missing" in out
    assert "not in the download mirror" in out
    assert "0/2 tasks passed, 2 with files missing, 0 failed" in out
    assert out.split("\n\n")[1].splitlines()[1].split() == ["files", "2", "1", "0", "0", "2", "0"]


# -- on real desktops -------------------------------------------------------------------------------


@pytest.mark.desktop
def test_judge_only_on_bundled_os_tasks_counts_per_domain(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    ids = ["os-count-lines", "os-make-executable", "os-infeasible-windows-installer"]
    code = envcheck.main(["--judge-only", "--json", "--tasks", *ids, "--workers", "1",
                          "--backend-options", backend_options(tmp_path)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["judge_only"] is True and report["mirror"] is None
    assert report["domains"] == {"os": {"tasks": 3, "reset_ok": 3, "judge_ok": 3, "score_0": 3,
                                        "files_missing": 0, "failed": 0}}
    assert report["passed"] == 3 and report["failed"] == [] and report["files_missing"] == []
    for result in report["results"]:
        assert (result["outcome"], result["reset_ok"], result["status_before"], result["score_before"],
                result["score_after"]) == ("ok", True, "ok", 0.0, None)
        assert {"reset_s", "judge_before_s", "total_s"} <= set(result["timings"])


@pytest.mark.desktop
def test_an_untouched_state_that_passes_fails_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    solved = {
        "id": "solved-before-acting", "snapshot": "os", "instruction": "Write done into ~/flag.txt.",
        "config": [{"type": "execute", "parameters": {"command": "echo done > ~/flag.txt", "shell": True}}],
        "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "cat ~/flag.txt",
                                                        "shell": True},
                      "expected": {"type": "rule", "rules": {"expected": "done\n"}}},
    }
    unknown = {**solved, "id": "unknown-metric", "evaluator": {**solved["evaluator"], "func": "exact_matsh"}}
    suite = write_suite(tmp_path / "suite", solved, unknown)
    code = envcheck.main(["--judge-only", "--json", "--path", str(suite), "--workers", "1",
                          "--backend-options", backend_options(tmp_path)])
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and sorted(report["failed"]) == ["solved-before-acting", "unknown-metric"]
    assert report["domains"]["os"] == {"tasks": 2, "reset_ok": 1, "judge_ok": 1, "score_0": 0, "files_missing": 0,
                                       "failed": 2}
    results = {r["task_id"]: r for r in report["results"]}
    solved_result = results["solved-before-acting"]
    assert (solved_result["reset_ok"], solved_result["status_before"], solved_result["score_before"]) == (True, "ok",
                                                                                                         1.0)
    assert "the untouched state scores 1.0" in solved_result["error"]
    # nothing here judges it: failed without a desktop, with the closest registered name
    assert results["unknown-metric"]["reset_ok"] is None
    assert "unknown metric 'exact_matsh' (did you mean 'exact_match'?)" in results["unknown-metric"]["error"]


@pytest.mark.desktop
def test_a_mirrored_download_arrives_with_the_mirrors_bytes(tmp_path: Path) -> None:
    base = f"https://127.0.0.1:{closed_port()}"  # the network would refuse at once
    suite = write_suite(tmp_path / "suite", download_task(base), download_task(base, "absent", folder="absent"))
    tasks = {t.id: t for t in load_tasks([str(suite)])}
    mirror = tmp_path / "mirror"
    (mirror / "127.0.0.1" / "data").mkdir(parents=True)
    (mirror / "127.0.0.1" / "gold").mkdir(parents=True)
    report = b"quarterly report\nrevenue: 12\n\x00\xff binary tail"
    (mirror / "127.0.0.1" / "data" / "report v1.txt").write_bytes(report)
    (mirror / "127.0.0.1" / "gold" / "expected.txt").write_text("quarterly report\nrevenue: 13\n")
    plugins = load_plugins(environ={})

    async def body() -> None:
        async with one_desktop(tmp_path, download_mirror=str(mirror)) as (pool, env):
            await pool.release(env)  # idle again: the check takes this desktop
            result = await envcheck.check_task(pool, plugins, tasks["mirror-download"], judge_only=True)
            assert (result.outcome, result.reset_ok, result.status_before, result.score_before) == ("ok", True, "ok",
                                                                                                   0.0), result.error
            again = await pool.acquire()  # the same desktop, as the check left it
            assert again is env
            assert await env.client.get_file("~/Desktop/report v1.txt") == report

            # a file the mirror lacks, found while setting up: a SetupError raised from FilesMissing
            with pytest.raises(SetupError) as info:
                await env.reset(tasks["absent"])
            missing = FilesMissing.within(info.value)
            assert missing is not None and missing.urls == [f"{base}/absent/report%20v1.txt?download=true"]
            assert str(mirror / "127.0.0.1" / "absent" / "report v1.txt") in str(info.value)
            assert await env.healthy()  # the desktop is fine: only the mirror lacks the file

    asyncio.run(body())
