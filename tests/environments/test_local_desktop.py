"""The local-desktop backend: pooled real desktops, reset, steps, and cleanup on close and on crash."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.errors import ActionParseError, EnvironmentFailure, ScaleCUAError
from core.types import Action, ActionType, JudgementStatus, Task
from core.interfaces import JudgeServices
from core.registry import Registry
from environments.local_desktop import LocalDesktop, LocalDesktopBackend, LocalDesktopOptions
from environments.setup import SetupError, run_setup_steps
from tests.environments.desktop_fixtures import tagged, wait_until

pytestmark = pytest.mark.desktop


def make_task(config: list[dict] | None = None, **extra: object) -> Task:
    return Task.model_validate({"id": "t-local", "instruction": "test", "config": config or [],
                                "evaluator": {"func": "infeasible"}, **extra})


def backend(tmp_path: Path, **options: object) -> LocalDesktopBackend:
    # these tests are about the pool and its processes; test_confined_desktop.py is about the desktop's user
    options.setdefault("desktop_user", None)
    return LocalDesktopBackend(LocalDesktopOptions(work_dir=str(tmp_path / "envs"), settle_s=0.1, **options))


def xterm_pids(env_id: str) -> list[int]:
    return [pid for pid in tagged(env_id) if b"xterm" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def test_registered_under_its_name_with_strict_options(plugins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    component = plugins.registry("environment").get("local-desktop")
    created = plugins.registry("environment").create("local-desktop", {"max_environments": 1, "desktop_user": None},
                                                     run_dir=tmp_path)
    assert isinstance(created, LocalDesktopBackend) and created.work_dir == tmp_path / "envs"
    assert (created.template / ".config/libreoffice/4/user/registrymodifications.xcu").is_file()
    with pytest.raises(ValidationError, match="max_envs"):
        component.parse_options({"max_envs": 2})


def test_a_configured_system_prompt_replaces_the_action_space_description(tmp_path: Path) -> None:
    default = backend(tmp_path).system_prompt(make_task())
    assert "computer_use" in default and "left_click_drag" in default
    assert backend(tmp_path, system_prompt="Use computer_use.").system_prompt(make_task()) == "Use computer_use."
    with pytest.raises(ValidationError, match="system_prompt"):
        LocalDesktopOptions(system_prompt="")


def test_missing_programs_are_named(tmp_path: Path) -> None:
    with pytest.raises(ScaleCUAError, match="missing programs: no-such-app-7"):
        backend(tmp_path, allowed_apps=["xterm", "no-such-app-7"])


def test_pool_reset_step_and_release(tmp_path: Path) -> None:
    async def body() -> None:
        pool = backend(tmp_path, max_environments=2, allowed_apps=["xterm"])
        try:
            first, second = await pool.acquire(), await pool.acquire()
            assert isinstance(first, LocalDesktop) and first.isolated is False
            assert first.display != second.display and first.home_dir != second.home_dir
            assert first.client.base_url != second.client.base_url

            # a third acquire waits for a release and then gets the released desktop
            waiting = asyncio.create_task(pool.acquire())
            await asyncio.sleep(0)  # one turn of the loop: the waiter runs until it blocks on the pool
            assert not waiting.done() and pool.size == 2 and pool._starting == 0  # parked, not starting a third
            await pool.release(second)
            assert await asyncio.wait_for(waiting, 10) is second

            task = make_task([
                {"type": "launch", "parameters": {"command": ["xterm", "-T", "reset-term"]}},
                {"type": "execute_with_verification", "parameters": {
                    "command": "true", "verification": {"window_exists": "reset-term"}, "max_wait_time": 60,
                    "check_interval": 0.1}},
            ])
            observation = await first.reset(task)
            assert observation.screenshot is not None and (observation.screenshot.width,
                                                           observation.screenshot.height) == (1280, 800)
            assert xterm_pids(first.env_id)

            # typing into the terminal really runs the command
            await first.step(Action(type=ActionType.TYPE, text="echo $((6*7)) > ~/answer.txt\n"))
            assert wait_until(lambda: (first.home_dir / "answer.txt").exists(), 60), "the typed command never ran"
            assert (first.home_dir / "answer.txt").read_text() == "42\n"
            step = await first.step(Action(type=ActionType.CURSOR_POSITION))
            assert step.info["cursor"] == [500, 500] and step.screenshot is not None  # reset centres the cursor
            refused = await first.step(Action(type=ActionType.KEY, keys=["Hyper_Q"]))
            assert refused.text.startswith("action failed") and "action_error" in refused.info
            done = await first.step(Action(type=ActionType.DONE))
            assert done.screenshot is None

            # reset: the apps are gone and the home directory is the template again
            (first.home_dir / "Desktop" / "junk.txt").write_text("junk")
            await first.reset(make_task())
            assert not xterm_pids(first.env_id)
            assert not (first.home_dir / "answer.txt").exists()
            assert not (first.home_dir / "Desktop" / "junk.txt").exists()
            assert (first.home_dir / ".config/chromium/First Run").exists()

            # discard closes the desktop for good
            ids = [first.env_id, second.env_id]
            await pool.release(first, discard=True)
            assert pool.size == 1 and not tagged(ids[0])
        finally:
            await pool.close()
        assert pool.size == 0
        assert wait_until(lambda: not tagged(ids[0]) and not tagged(ids[1]), 60), {i: tagged(i) for i in ids}
        with pytest.raises(EnvironmentFailure, match="closed"):
            await pool.acquire()

    asyncio.run(body())


def test_setup_failures_and_the_agent_protocol(tmp_path: Path) -> None:
    async def body() -> None:
        pool = backend(tmp_path, max_environments=1, setup_retries=1)
        try:
            env = await pool.acquire()
            broken = make_task([{"type": "open", "parameters": {"path": "~/missing.ods"}}])
            with pytest.raises(SetupError, match="task t-local: the probe refused"):
                await env.reset(broken)
            await env.reset(make_task())
            from_file = make_task()
            from_file._source_dir = str(tmp_path)
            assert env.setup_context(from_file).task_dir == tmp_path  # relative setup paths resolve there
            # postconfig-style steps through the environment
            await run_setup_steps(env, [{"type": "execute", "parameters": {
                "command": "echo {SCREEN_WIDTH} > {HOME}/w.txt", "shell": True}}])
            assert (env.home_dir / "w.txt").read_text() == "1280\n"

            prompt = pool.system_prompt(make_task())
            assert "computer_use" in prompt and "write_file" not in prompt
            assert pool.parse_response('<tool_call>{"name": "computer_use", "arguments": {"action": "fail"}}'
                                       "</tool_call>") == [Action(type=ActionType.FAIL)]
            with pytest.raises(ActionParseError):
                pool.parse_response("no idea")
            judged = await pool.evaluate(env, make_task(), judge=JudgeServices(Registry("getter"), Registry("metric")),
                                         last_action=Action(type=ActionType.FAIL))
            assert judged.status == JudgementStatus.OK and judged.score == 1.0
            # OSWorld's postconfig "command" with stdout: NAME, read back by the cache_file getter
            from core.pluginmanager import load_plugins

            registries = load_plugins()
            listing = Task.model_validate({"id": "t-cache", "instruction": "test", "evaluator": {
                "postconfig": [{"type": "command", "parameters": {"command": ["ls", "-a", "{HOME}"],
                                                                   "stdout": "ls.out"}}],
                "func": "check_list", "result": {"type": "cache_file", "path": "ls.out"},
                "expected": {"type": "rule", "rules": {"expect": [r"^w\.txt$"], "unexpect": [r"^absent$"]}}}})
            judged = await pool.evaluate(env, listing, judge=JudgeServices.of(registries), last_action=None)
            assert (judged.status, judged.score) == (JudgementStatus.OK, 1.0), judged.error
            # a postconfig command that finds nothing (the agent never made the directory) is the metric's to
            # score, not a judge crash (OSWorld's harness logs it and judges)
            unmade = Task.model_validate({"id": "t-unmade", "instruction": "test", "evaluator": {
                "postconfig": [{"type": "execute", "parameters": {"command": "cd {HOME} && ls -R never-made > ls.txt",
                                                                   "shell": True}}],
                "func": "check_list", "result": {"type": "vm_file", "path": "{HOME}/ls.txt", "dest": "ls.txt"},
                "expected": {"type": "rule", "rules": {"expect": ["anything"]}}}})
            judged = await pool.evaluate(env, unmade, judge=JudgeServices.of(registries), last_action=None)
            assert (judged.status, judged.score) == (JudgementStatus.OK, 0.0), judged.error
            checked = unmade.model_copy(deep=True)
            checked.evaluator.postconfig[0].parameters["check"] = True
            judged = await pool.evaluate(env, checked, judge=JudgeServices.of(registries), last_action=None)
            assert judged.status == JudgementStatus.CRASHED and "postconfig failed" in judged.error
            escaping = listing.model_copy(deep=True)
            escaping.evaluator.postconfig[0].parameters["stdout"] = "../outside.out"
            judged = await pool.evaluate(env, escaping, judge=JudgeServices.of(registries), last_action=None)
            assert judged.status == JudgementStatus.CRASHED and "escapes the evaluation's cache" in judged.error
            await pool.release(env)
        finally:
            await pool.close()

    asyncio.run(body())


def test_a_desktop_whose_session_died_is_replaced_and_cleaned(tmp_path: Path) -> None:
    async def body() -> None:
        pool = backend(tmp_path, max_environments=1)
        try:
            env = await pool.acquire()
            await env.client.execute("setsid sleep 300 > /dev/null 2>&1 &", shell=True)
            assert wait_until(lambda: any(b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes()
                                          for p in tagged(env.env_id)), 60), "the background sleep never started"
            os.kill(env._session.pid, signal.SIGKILL)  # the supervisor itself dies
            await asyncio.wait_for(env._session.wait(), 60)  # bounds a hang only: the death has been seen
            assert not await env.healthy()
            await pool.release(env)  # unhealthy: closed, not pooled
            assert pool.size == 0 and not tagged(env.env_id)
            fresh = await pool.acquire()
            assert fresh is not env and await fresh.healthy()
        finally:
            await pool.close()

    asyncio.run(body())


CRASHING_OWNER = textwrap.dedent("""
    import asyncio, json, sys
    from environments.local_desktop import LocalDesktopBackend, LocalDesktopOptions

    async def main():
        # the default options: as root, the desktops run as the unprivileged desktop user (homes under /tmp)
        pool = LocalDesktopBackend(LocalDesktopOptions(max_environments=2))
        envs = [await pool.acquire(), await pool.acquire()]
        for env in envs:
            await env.client.launch(["xterm"])
            await env.client.execute("sleep 300 > /dev/null 2>&1 &", shell=True)
            await env.client.execute("setsid sleep 301 > /dev/null 2>&1 &", shell=True)
        print(json.dumps([env.env_id for env in envs]), flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
""")


def test_a_sigkilled_owner_leaves_nothing_behind(tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", CRASHING_OWNER], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    assert owner.stdout is not None
    try:
        line = owner.stdout.readline()
        while line and not line.startswith("["):  # skip log lines
            line = owner.stdout.readline()
        env_ids = json.loads(line)
        # session, Xvfb, D-Bus, WM, probe, xterm and two sleeps per desktop
        assert wait_until(lambda: all(len(tagged(e)) >= 8 for e in env_ids), 60), {e: tagged(e) for e in env_ids}
        before = [pid for e in env_ids for pid in tagged(e)]
    finally:
        owner.kill()
        owner.wait()
    # 60 s bounds a hang only: how soon the orphans go depends on the machine's load, not on correctness
    assert wait_until(lambda: not any(tagged(e) for e in env_ids), 60), {e: tagged(e) for e in env_ids}
    # zombies aside (their cmdline is empty), every one of those processes is gone
    assert all(not Path(f"/proc/{pid}").exists() or not Path(f"/proc/{pid}/cmdline").read_bytes() for pid in before)
