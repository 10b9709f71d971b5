"""``local-desktop``: real desktops on this host, without containers.

Each environment is one supervised session (:mod:`environments.display`):
Xvfb on a free display, a private D-Bus bus, openbox, and the probe on a free
loopback port with a random bearer token, plus a home directory of its own.
``reset`` kills the task's applications, restores the home directory from
the template, runs the task's setup steps and returns the first observation.
With ``download_mirror``, setup's http(s) downloads and ``cloud_file`` gold
files come from that directory instead of the network (:mod:`environments.mirror`).
With ``record_video``, each episode's screen is recorded (:mod:`environments.recordings`).

Environments are pooled: ``acquire`` hands out an idle one or starts a new one
(up to ``max_environments``); ``release(discard=True)`` replaces a
misbehaving one. Every process is cleaned up on close, and also when this
process dies without closing (the sessions watch their parent).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field

from core.errors import EnvironmentFailure, FilesMissing, ScaleCUAError
from core.interfaces import Environment, EnvironmentBackend
from core.types import Action, ActionType, Observation, Screenshot, Task
from environments import desktop_user, display, home_template
from environments.client import EnvironmentClient, ProbeError, act_and_observe
from environments.desktop_protocol import DesktopProtocol
from environments.mirror import LAYOUT, check_mirror
from environments.recordings import EpisodeRecording
from environments.setup import SetupContext, SetupError, run_setup

log = structlog.get_logger(__name__)

REQUIRED_PROGRAMS = {"Xvfb": "xvfb", "xdotool": "xdotool", "xprop": "x11-utils", "dbus-daemon": "dbus"}


class LocalDesktopOptions(BaseModel):
    """Options of the ``local-desktop`` environment backend."""

    model_config = ConfigDict(extra="forbid")

    width: int = Field(1280, ge=320, le=7680, description="screen width in pixels (the paper: 1280)")
    height: int = Field(800, ge=200, le=4320, description="screen height in pixels (the paper: 800)")
    depth: int = Field(24, description="colour depth of the X screen")
    max_environments: int = Field(4, ge=1, le=256, description="most desktops alive at once (the pool size)")
    window_manager: str = Field("openbox", description="window manager binary, or 'none'")
    allowed_apps: list[str] | None = Field(
        None, description="programs setup 'launch' steps may start; each must be installed (None: any)"
    )
    home_template: str | None = Field(None, description="directory copied into each fresh home (default: built-in)")
    work_dir: str | None = Field(None, description="where homes and logs live (default: <run_dir>/envs or a tmp dir)")
    startup_timeout_s: float = Field(30.0, gt=0, description="limit for one desktop to come up")
    reset_timeout_s: float = Field(300.0, gt=0, description="limit for one reset, setup steps included")
    setup_retries: int = Field(1, ge=0, description="extra attempts when a task's setup fails")
    setup_failures: Literal["fail", "warn"] = Field(
        "fail", description="a setup command exiting non-zero or timing out: fail the reset (retried, never scored) "
        "or warn and start the episode anyway (OSWorld's own harness does; upstream-compatibility runs only)"
    )
    settle_s: float = Field(0.3, ge=0, description="pause after an action before the screenshot")
    accessibility: bool = Field(False, description="let apps export AT-SPI trees (slower app start)")
    observe_accessibility: bool = Field(False, description="put the AT-SPI tree into each observation")
    client_password: str = Field("password", description="value of the {CLIENT_PASSWORD} placeholder")
    keep_env_dirs: bool = Field(False, description="keep each desktop's home and log after it closes")
    action_format: Literal["tool_call", "pyautogui", "computer_13"] = Field(
        "tool_call", description="how the agent writes actions (tool_call: ours; the others: OSWorld's)"
    )
    scienceboard_actions: bool = Field(False, description="offer ScienceBoard's answer and write_file actions")
    system_prompt: str | None = Field(
        None, min_length=1, description="the agent's system prompt, replacing the default (the task's "
        "environment and the full action space in action_format); it should still say how to write actions"
    )
    desktop_user: str | None = Field(
        "scalecua-desktop", description="when the trainer runs as root: the unprivileged user the apps, commands and "
        "the agent's shell run as (created if missing; homes then live outside the run directory, which becomes "
        "0700); null: as root. Ignored when the trainer is not root"
    )
    probe_routes: list[str] = Field(default_factory=list, description="modules whose ROUTES the probe also serves "
                                                                      "(e.g. environments.scienceboard.checkers)")
    download_mirror: str | None = Field(
        None, description="a directory on this host serving the http(s) files tasks fetch (download steps, "
        f"cloud_file gold files) instead of the network, laid out as {LAYOUT}; a file it lacks fails the reset "
        "with FilesMissing (null: the network)"
    )
    record_video: bool = Field(
        False, description="record each episode's screen (ffmpeg, Debian package ffmpeg) from the end of its reset "
        "until the desktop is released (judging included) into <run_dir>/recordings/ (without a run directory: "
        "<work_dir>/recordings/); the trajectory's `recording` names the MP4 and the episode viewer plays it"
    )


def check_programs(options: LocalDesktopOptions) -> None:
    """Every program the backend or the tasks need is installed; else one error naming them all."""
    needed = dict(REQUIRED_PROGRAMS)
    if options.window_manager != "none":
        needed[options.window_manager] = options.window_manager
    for app in options.allowed_apps or []:
        needed[app] = app
    if options.record_video:
        needed["ffmpeg"] = "ffmpeg"
    missing = [f"{prog} (Debian package {pkg})" for prog, pkg in needed.items() if shutil.which(prog) is None]
    if missing:
        raise ScaleCUAError(f"local-desktop: missing programs: {', '.join(missing)}. Install them with apt-get.")


class LocalDesktop(Environment):
    """One desktop session on this host."""

    isolated = False

    def __init__(self, env_id: str, root: Path, template: Path, options: LocalDesktopOptions,
                 user: desktop_user.DesktopUser | None = None, recordings: Path | None = None):
        self.env_id = env_id
        self.user = user
        self.root = root
        self.home_dir = root / "home"
        self.template = template
        self.options = options
        self.screen_size = (options.width, options.height)
        self.client: EnvironmentClient | None = None  # type: ignore[assignment]
        self.display: str | None = None
        self._token = secrets.token_urlsafe(24)
        self._session: asyncio.subprocess.Process | None = None
        self._core_pids: set[int] = set()
        #: the screen recordings of its episodes (record_video), saved into ``recordings``
        self.recording = EpisodeRecording(recordings, env_id) if recordings is not None else None

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        o = self.options
        self.root.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self._restore_home)
        log_file = open(self.root / "session.log", "ab")  # noqa: SIM115 (handed to the child)
        os.chmod(self.root / "session.log", 0o600)
        try:
            self._session = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "environments.display", "--env-id", self.env_id, "--home", str(self.home_dir),
                "--runtime-dir", str(self.root / "runtime"), "--size", f"{o.width}x{o.height}x{o.depth}",
                "--window-manager", o.window_manager, "--startup-timeout", str(o.startup_timeout_s),
                *(["--accessibility"] if o.accessibility else []),
                *(["--user", self.user.name] if self.user else []),
                *[arg for module in o.probe_routes for arg in ("--probe-routes", module)],
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=log_file,
                env={**os.environ, "SCALECUA_PROBE_TOKEN": self._token}, start_new_session=True,
            )
        finally:
            log_file.close()
        assert self._session.stdout is not None
        try:
            line = await asyncio.wait_for(self._session.stdout.readline(), o.startup_timeout_s + 5)
        except asyncio.TimeoutError:
            line = b""
        info = json.loads(line) if line.strip().startswith(b"{") else {"error": "no answer from the session"}
        if "error" in info:
            await self.close()
            raise EnvironmentFailure(f"desktop {self.env_id} did not start: {info['error']}. {self._log_tail()}")
        self.display = info["display"]
        self._core_pids = {self._session.pid, *info["pids"].values()}
        self.client = EnvironmentClient(f"http://127.0.0.1:{info['probe_port']}", self._token)
        try:
            await self.client.wait_ready(o.startup_timeout_s)
        except ProbeError:
            await self.close()
            raise
        log.info("desktop started", env_id=self.env_id, display=self.display, port=info["probe_port"])

    def _restore_home(self) -> None:
        home_template.restore_home(self.template, self.home_dir)
        if self.user is not None:
            desktop_user.chown_tree(self.home_dir, self.user)

    def _log_tail(self, lines: int = 5) -> str:
        try:
            tail = (self.root / "session.log").read_text(errors="replace").strip().splitlines()[-lines:]
        except OSError:
            return ""
        return "Session log: " + " | ".join(tail) if tail else ""

    async def close(self) -> None:
        if self.client is not None:
            await self.end_recording()
            await self.client.close()
        session = self._session
        if session is not None and session.returncode is None:
            session.send_signal(signal.SIGTERM)  # the session kills its apps, probe, WM and Xvfb
            try:
                await asyncio.wait_for(session.wait(), 10)
            except asyncio.TimeoutError:
                try:
                    os.killpg(session.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                await session.wait()
        await asyncio.to_thread(display.sweep, self.env_id, grace_s=0.5)  # stragglers that left the tree
        if not self.options.keep_env_dirs:
            await asyncio.to_thread(shutil.rmtree, self.root, True)
        log.info("desktop closed", env_id=self.env_id)

    async def healthy(self) -> bool:
        if self._session is None or self._session.returncode is not None or self.client is None:
            return False
        try:
            await asyncio.wait_for(self.client.screen_size(), 10)
        except (ProbeError, asyncio.TimeoutError):
            return False
        return True

    # -- episodes --------------------------------------------------------------

    async def kill_apps(self) -> None:
        """Kill everything this desktop runs except the session itself (Xvfb, bus, WM, probe)."""
        # Apps fork while dying (Chromium's zygote, soffice.bin): sweep until nothing tagged is left.
        for _ in range(5):
            victims = await asyncio.to_thread(display.sweep, self.env_id, keep=self._core_pids, grace_s=2.0)
            if not victims:
                break
            await asyncio.sleep(0.1)

    async def reset(self, task: Task) -> Observation:
        attempts = self.options.setup_retries + 1
        for attempt in range(attempts):
            try:
                return await asyncio.wait_for(self._reset_once(task), self.options.reset_timeout_s)
            except asyncio.TimeoutError:
                raise EnvironmentFailure(
                    f"desktop {self.env_id}: reset for task {task.id} exceeded {self.options.reset_timeout_s:g} s"
                ) from None
            except SetupError as exc:
                if attempt + 1 == attempts or FilesMissing.within(exc):  # the mirror lacks them on a retry too
                    raise SetupError(exc.index, exc.step_type, f"task {task.id}: {exc.reason}") from exc
                log.warning("setup failed; retrying", env_id=self.env_id, task_id=task.id, error=str(exc))
        raise AssertionError("unreachable")

    async def _reset_once(self, task: Task) -> Observation:
        client = self._client()
        await self.end_recording()  # reset again without a release in between: the last one is kept too
        await self.kill_apps()
        await asyncio.to_thread(self._restore_home)
        # input state survives the apps: release anything held, put the cursor in the middle
        await client.execute(["xdotool", "keyup", "shift", "ctrl", "alt", "super", "mouseup", "1"], timeout=10)
        await client.act(Action(type=ActionType.MOUSE_MOVE, x=500, y=500))
        await run_setup(client, task.config, self.setup_context(task))
        if self.options.settle_s:
            await asyncio.sleep(self.options.settle_s)
        recording = await self.recording.start(client) if self.recording is not None else None
        observation = await self.observe()
        if recording is not None:  # the episode runner names it in the trajectory
            observation.info["recording"] = str(recording)
        return observation

    async def end_recording(self) -> None:
        """End and save the running screen recording, if any (never raises: a lost recording is a warning)."""
        if self.recording is not None and self.client is not None:
            await self.recording.finish(self.client)

    def setup_context(self, task: Task | None = None) -> SetupContext:
        """Setup-step context; relative file paths in a task resolve against ``task.metadata['task_dir']``,
        else the directory the task file was loaded from."""
        task_dir = (task.metadata.get("task_dir") or getattr(task, "source_dir", None)) if task is not None else None
        return SetupContext(
            screen_size=self.screen_size, task_dir=Path(task_dir) if task_dir else None,
            allowed_apps=self.options.allowed_apps, client_password=self.options.client_password,
            home=str(self.home_dir), command_failures=self.options.setup_failures,
            download_mirror=Path(self.options.download_mirror) if self.options.download_mirror else None,
        )

    async def step(self, action: Action) -> Observation:
        return await act_and_observe(action, self._client().act, self.observe, settle_s=self.options.settle_s)

    async def observe(self) -> Observation:
        client = self._client()
        screenshot = Screenshot.from_png(await client.screenshot())
        tree = await client.accessibility_tree() if self.options.observe_accessibility else None
        return Observation(screenshot=screenshot, accessibility_tree=tree)

    def _client(self) -> EnvironmentClient:
        if self.client is None:
            raise EnvironmentFailure(f"desktop {self.env_id} is not running")
        return self.client


class LocalDesktopBackend(DesktopProtocol, EnvironmentBackend):
    """A pool of :class:`LocalDesktop` environments."""

    def __init__(self, options: LocalDesktopOptions, run_dir: Path | None = None):
        if options.download_mirror:  # absolute: the desktops' setup contexts read it from anywhere
            mirror = check_mirror(options.download_mirror, "local-desktop")
            options = options.model_copy(update={"download_mirror": str(mirror)})
        check_programs(options)
        self.options = options
        self.user = desktop_user.resolve(options.desktop_user)
        if self.user is not None and run_dir is not None:
            Path(run_dir).mkdir(parents=True, exist_ok=True)
            Path(run_dir).chmod(0o700)  # checkpoints, configs and logs are not the agent's to read
            log.info("desktops run as an unprivileged user; the run directory is closed to it", user=self.user.name,
                     run_dir=str(run_dir))
        self._owns_work_dir = False
        self._stale: list[Path] = []  # a SIGKILLed attempt's directories still in use when this one started
        if options.work_dir:
            self.work_dir = Path(options.work_dir)
        elif run_dir is not None and self.user is None:
            self.work_dir = Path(run_dir) / "envs"
        else:
            # named after the run: a resumed run removes what a SIGKILLed attempt of it left there
            self.work_dir, self._stale = home_template.run_work_dir(run_dir)
            self._owns_work_dir = True  # removed again by close()
            # mkdtemp makes it 0700; the judge sandbox's unprivileged user must reach the homes (read-only)
            self.work_dir.chmod(0o755)
        # absolute: the probe and the apps run with other working directories
        self.work_dir = self.work_dir.resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.recordings: Path | None = None
        if options.record_video:  # in the run directory, which outlives the desktops' work directory
            self.recordings = (Path(run_dir).resolve() if run_dir is not None else self.work_dir) / "recordings"
        if self.user is not None:
            desktop_user.check_reachable(self.work_dir, self.user)
        if options.home_template:
            self.template = Path(options.home_template)
            if not self.template.is_dir():
                raise ScaleCUAError(f"local-desktop: home_template {self.template} is not a directory")
        else:
            self.template = home_template.write_default_template(self.work_dir / "home-template")
        self._idle: list[LocalDesktop] = []
        self._all: set[LocalDesktop] = set()
        self._starting = 0
        self._closed = False
        self._condition: asyncio.Condition | None = None

    @property
    def _cond(self) -> asyncio.Condition:
        if self._condition is None:  # created inside the running loop
            self._condition = asyncio.Condition()
        return self._condition

    async def acquire(self) -> LocalDesktop:
        async with self._cond:
            while True:
                if self._closed:
                    raise EnvironmentFailure("local-desktop backend is closed")
                if self._idle:
                    return self._idle.pop()
                if len(self._all) + self._starting < self.options.max_environments:
                    self._starting += 1
                    break
                await self._cond.wait()
        env_id = f"desk-{uuid.uuid4().hex[:10]}"
        env = LocalDesktop(env_id, self.work_dir / env_id, self.template, self.options, self.user, self.recordings)
        try:
            await env.start()
        except BaseException:
            async with self._cond:
                self._starting -= 1
                self._cond.notify()
            raise
        async with self._cond:
            self._starting -= 1
            self._all.add(env)
        return env

    async def release(self, env: Environment, *, discard: bool = False) -> None:
        assert isinstance(env, LocalDesktop)
        if env not in self._all:
            raise ValueError(f"environment {env.env_id} does not belong to this backend")
        await env.end_recording()  # the episode is over, judged too
        if discard or self._closed or not await env.healthy():
            async with self._cond:
                self._all.discard(env)
                self._cond.notify()
            await env.close()
            return
        async with self._cond:
            self._idle.append(env)
            self._cond.notify()

    async def close(self) -> None:
        async with self._cond:
            self._closed = True
            envs, self._all, self._idle = list(self._all), set(), []
            self._cond.notify_all()
        await asyncio.gather(*(env.close() for env in envs), return_exceptions=True)
        if self._owns_work_dir:  # a temporary directory of our own: nothing of it outlives the run
            await asyncio.to_thread(shutil.rmtree, self.work_dir, True)
        if self._stale:  # its desktops have had the whole run to notice their parent died and exit
            await asyncio.to_thread(home_template.remove_stale_work_dirs, "", only=self._stale)

    @property
    def size(self) -> int:
        return len(self._all)


def create_backend(options: LocalDesktopOptions, run_dir: Path | None = None, **_: Any) -> LocalDesktopBackend:
    return LocalDesktopBackend(options, run_dir=run_dir)
