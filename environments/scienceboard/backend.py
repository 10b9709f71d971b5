"""``scienceboard``: ScienceBoard tasks on the desktops of another environment backend.

The backend wraps a desktop backend chosen by name (``local-desktop`` by
default, or a container backend) and adds what ScienceBoard defines on top:

* its task format (:func:`convert_task`; OSWorld-format tasks pass through),
* ``reset``: the desktop's own reset (apps killed, home restored), then the
  task's ``initialize`` list (:mod:`.initialize`),
* the agent primitives of the paper's appendix A.3 -- ``done``, ``fail``,
  ``wait``, ``answer`` (checked against the task's ``stop ANS`` item / ``ans``)
  and ``write_file`` -- in our tool-call format, or in ScienceBoard's own
  (fenced pyautogui code and ``DONE``/``FAIL``/``WAIT n``/``ANS s``),
* ``evaluate``: the converted evaluator, with the episode's last action
  available to ``stop`` items. As upstream, a trajectory that ends with FAIL is
  judged by the items, not zeroed.

``download_mirror`` passes through to the desktop backend (whose setup
contexts, used by ``initialize`` too, carry it: :mod:`environments.mirror`).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.errors import ActionParseError, EnvironmentFailure, FilesMissing, ScaleCUAError
from core.interfaces import Environment, EnvironmentBackend, JudgeServices
from core.types import Action, ActionType, Judgement, Observation, Task
from environments import actions
from environments.scienceboard import convert
from environments.scienceboard.initialize import run_initialize
from environments.setup import SetupContext, SetupError

log = structlog.get_logger(__name__)

#: the module whose ROUTES the desktops' probes serve for ScienceBoard's checkers (see ``probe --routes``)
CHECKER_ROUTES = "environments.scienceboard.checkers"

#: what each application is, for the system prompt
APPLICATIONS = {
    "KAlgebra": "KAlgebra, a graphing calculator (console on the Calculator tab, plots on the 2D/3D Graph tabs)",
    "TeXstudio": "TeXstudio, a LaTeX editor; save your edits, the document must still compile with pdflatex",
    "GrassGIS": "GRASS GIS, a geographic information system (modules can be typed on its Console tab)",
    "Lean": "Lean 4, a theorem prover; replace the sorry with a proof and save, without editing the statement",
    "ChimeraX": "ChimeraX, a molecular visualization program",
    "Celestia": "Celestia, a 3D space simulator",
}


class DesktopSlot(BaseModel):
    """The desktop backend underneath: a registered environment backend and its options."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("local-desktop", description="registered environment backend (e.g. local-desktop)")
    options: dict[str, Any] = Field(default_factory=dict, description="that backend's options")

    @model_validator(mode="after")
    def _known_backend(self) -> DesktopSlot:
        """The backend exists and takes these options (checked with the config, not when desktops start)."""
        if self.name == "scienceboard":
            raise ValueError("desktop.name must be a desktop backend such as local-desktop, not scienceboard itself")
        from core.pluginmanager import load_plugins
        from core.registry import unknown_name_message

        registry = load_plugins().registry("environment")
        if self.name not in registry:
            raise ValueError(unknown_name_message(registry.label, self.name, registry.names()))
        try:
            registry.get(self.name).parse_options(dict(self.options))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"options of {self.name}: {problems}") from None
        return self


def _default_desktop() -> DesktopSlot:
    # KAlgebra's state is read over AT-SPI: desktops need their accessibility bus
    return DesktopSlot(name="local-desktop", options={"accessibility": True})


class ScienceBoardOptions(BaseModel):
    """Options of the ``scienceboard`` environment backend."""

    model_config = ConfigDict(extra="forbid")

    desktop: DesktopSlot = Field(default_factory=_default_desktop, description="the desktops the tasks run on")
    max_environments: int | None = Field(None, ge=1, description="most desktops at once (sets the desktop "
                                                                   "backend's max_environments)")
    action_format: Literal["tool_call", "scienceboard"] = Field(
        "tool_call", description="tool_call: our computer_use calls; scienceboard: fenced pyautogui code and "
                                 "DONE/FAIL/WAIT n/ANS s primitives")
    app_port: int = Field(8000, ge=1024, le=65535, description="value of «PORTLIKE»: the apps' REST server port")
    upstream_home: str = Field(convert.UPSTREAM_HOME, description="home directory in upstream task files, mapped "
                                                                  "to the desktop user's home ('' keeps paths)")
    init_retries: int = Field(1, ge=0, description="extra attempts when a task's initialize list fails")
    reset_timeout_s: float = Field(300.0, gt=0, description="limit for one reset, initialize included")
    settle_s: float = Field(0.5, ge=0, description="pause after initialize before the first screenshot")
    download_mirror: str | None = Field(None, description="sets the desktop backend's download_mirror: a directory "
                                        "serving the http(s) files tasks fetch instead of the network")


class ScienceBoardEnvironment(Environment):
    """A desktop of the wrapped backend, reset the ScienceBoard way; records the episode's last action."""

    def __init__(self, inner: Environment, options: ScienceBoardOptions):
        self.inner = inner
        self.options = options
        #: the action that ended the episode; ``stop`` items read it (set by the backend's evaluate)
        self.last_action: Action | None = None

    # the Environment attributes are the desktop's
    env_id = property(lambda self: self.inner.env_id)
    screen_size = property(lambda self: self.inner.screen_size)
    isolated = property(lambda self: self.inner.isolated)
    home_dir = property(lambda self: getattr(self.inner, "home_dir", None))
    client = property(lambda self: self.inner.client)

    def __getattr__(self, name: str) -> Any:  # setup_context, kill_apps, ... of the desktop
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def setup_context(self, task: Task | None = None) -> SetupContext:
        make = getattr(self.inner, "setup_context", None)
        if callable(make):  # the desktop's context: its download_mirror included
            return make(task)
        task_dir = task.source_dir if task is not None else None
        home = self.home_dir
        return SetupContext(screen_size=tuple(self.screen_size), task_dir=Path(task_dir) if task_dir else None,
                            home=str(home) if home else "~")

    async def reset(self, task: Task) -> Observation:
        self.last_action = None
        source = task.metadata.get("scienceboard")
        if not source:
            return await self.inner.reset(task)
        attempts = self.options.init_retries + 1
        for attempt in range(attempts):
            try:
                return await asyncio.wait_for(self._reset_once(task, source), self.options.reset_timeout_s)
            except asyncio.TimeoutError:
                raise EnvironmentFailure(f"desktop {self.env_id}: reset for task {task.id} exceeded "
                                         f"{self.options.reset_timeout_s:g} s") from None
            except SetupError as exc:
                if attempt + 1 == attempts or FilesMissing.within(exc):  # the mirror lacks them on a retry too
                    raise SetupError(exc.index, exc.step_type, f"task {task.id}: {exc.reason}") from exc
                log.warning("initialize failed; retrying", env_id=self.env_id, task_id=task.id, error=str(exc))
        raise AssertionError("unreachable")

    async def _reset_once(self, task: Task, source: Mapping[str, Any]) -> Observation:
        bare = task.model_copy(update={"config": []})  # the desktop restores its clean state only
        first = await self.inner.reset(bare)
        await run_initialize(self.client, str(source["type"]), source.get("initialize", []),
                             self.setup_context(task), port=self.options.app_port)
        if self.options.settle_s:
            await asyncio.sleep(self.options.settle_s)
        observation = await self.inner.observe()
        if "recording" in first.info:  # the desktop's screen recording of this episode (environments/recordings.py)
            observation.info["recording"] = first.info["recording"]
        return observation

    async def step(self, action: Action) -> Observation:
        return await self.inner.step(action)

    async def observe(self) -> Observation:
        return await self.inner.observe()

    async def healthy(self) -> bool:
        return await self.inner.healthy()


_CODE = re.compile(r"```(?:\w*\s+)?([\w\W]*?)```")  # upstream's extract_antiquot
_WAIT = re.compile(r"^WAIT(?:\s+(\d+(?:\.\d+)?))?$")


def parse_scienceboard(text: str, screen_size: tuple[int, int]) -> list[Action]:
    """ScienceBoard's response format: fenced blocks of pyautogui code or one primitive each."""
    from environments import osworld_actions

    blocks = [b.strip() for b in _CODE.findall(actions._THINK.sub("", text))]
    if not blocks:
        raise ActionParseError("no action found: answer with a ```python``` block of pyautogui code, or a block "
                               "holding one of DONE, FAIL, WAIT [seconds], ANS <answer>")
    parsed: list[Action] = []
    for block in blocks:
        first = block.split(None, 1)[0] if block else ""
        if block in ("DONE", "FAIL"):
            parsed.append(Action(type=ActionType(block.lower())))
        elif first == "ANS":
            answer = block[3:].strip()
            if not answer:
                raise ActionParseError("ANS needs the answer after it, e.g. ANS 42")
            parsed.append(Action(type=ActionType.ANSWER, text=answer))
        elif first == "WAIT":
            match = _WAIT.match(block)
            if match is None:
                raise ActionParseError(f"WAIT takes an optional number of seconds, got {block!r:.60}")
            parsed.append(Action(type=ActionType.WAIT, duration=min(float(match.group(1) or 5), 60.0)))
        else:
            parsed.extend(osworld_actions.from_pyautogui(block, screen_size))
    return parsed


class ScienceBoardBackend(EnvironmentBackend):
    def __init__(self, options: ScienceBoardOptions, desktops: EnvironmentBackend):
        self.options = options
        self.desktops = desktops

    # -- pool: the desktop backend's, each desktop wrapped ------------------------------------

    async def acquire(self) -> ScienceBoardEnvironment:
        return ScienceBoardEnvironment(await self.desktops.acquire(), self.options)

    async def release(self, env: Environment, *, discard: bool = False) -> None:
        if not isinstance(env, ScienceBoardEnvironment):
            raise ValueError(f"environment {getattr(env, 'env_id', env)!r} was not acquired from this backend")
        await self.desktops.release(env.inner, discard=discard)

    async def close(self) -> None:
        await self.desktops.close()

    # -- tasks and the agent protocol --------------------------------------------------------------

    def convert_task(self, raw: Mapping[str, Any]) -> Task:
        if convert.is_scienceboard(raw):
            return convert.convert_task(raw, port=self.options.app_port, upstream_home=self.options.upstream_home)
        return Task.model_validate(raw)

    def _screen(self) -> tuple[int, int]:
        options = getattr(self.desktops, "options", None)
        return (getattr(options, "width", 1280), getattr(options, "height", 800))

    def system_prompt(self, task: Task) -> str:
        app = task.metadata.get("scienceboard", {}).get("type") or task.domain
        about = APPLICATIONS.get(app, app or "scientific software")
        steps = task.metadata.get("max_steps")
        width, height = self._screen()
        if self.options.action_format == "tool_call":
            space = actions.format_action_space(scienceboard=True, screen_size=(width, height))
        else:
            space = (f"You control a {width}x{height} Linux desktop. Answer with fenced code blocks: Python code "
                     "calling pyautogui (absolute pixel coordinates), or a block holding exactly one of DONE (the "
                     "task is complete), FAIL (it cannot be done), WAIT [seconds], ANS <answer> (submit the "
                     "answer a question asks for).")
        rules = [
            f"The task is about {about}.",
            "When the task asks for a value, submit it with the answer action and nothing else in the text.",
            "When you have completed the task, finish with done; if it cannot be done, finish with fail.",
        ]
        if steps:
            rules.append(f"You have at most {steps} steps.")
        return ("You are a computer-use agent that operates scientific software. You see a screenshot of the "
                "desktop after every action and complete the user's task step by step. Think briefly, then act.\n\n"
                + space + "\n\n" + "\n".join(rules))

    def parse_response(self, text: str) -> list[Action]:
        if self.options.action_format == "scienceboard":
            return parse_scienceboard(text, self._screen())
        return actions.parse_actions(text)

    def format_response(self, demonstrated: Sequence[Action]) -> str:
        return actions.format_response(demonstrated, self.options.action_format)

    async def evaluate(self, env: Environment, task: Task, *, judge: JudgeServices,
                       last_action: Action | None) -> Judgement:
        from environments.judges.evaluate import evaluate
        from environments.setup import run_postconfig_steps

        if not isinstance(env, ScienceBoardEnvironment):
            raise ValueError(f"environment {getattr(env, 'env_id', env)!r} was not acquired from this backend")
        env.last_action = last_action
        native = bool(task.metadata.get("scienceboard"))
        # ScienceBoard judges a FAIL by the task's items (a 'stop FAIL' item); OSWorld zeroes it
        return await evaluate(task, env, judge=judge,
                              last_action=None if native else last_action, postconfig=run_postconfig_steps)


def create_backend(options: ScienceBoardOptions, run_dir: Path | None = None, **context: Any) -> ScienceBoardBackend:
    from core.pluginmanager import load_plugins

    registry = load_plugins().registry("environment")
    desktop_options = dict(options.desktop.options)
    if options.max_environments is not None:
        desktop_options["max_environments"] = options.max_environments
    if options.download_mirror is not None:  # the desktop backend checks the directory
        desktop_options["download_mirror"] = options.download_mirror
    if "probe_routes" in registry.get(options.desktop.name).options_model.model_fields:
        # the desktops' probes serve ScienceBoard's /tex/check and /lean/check (the probe never imports them)
        routes = list(desktop_options.get("probe_routes") or [])
        desktop_options["probe_routes"] = routes + [m for m in (CHECKER_ROUTES,) if m not in routes]
    try:
        desktops = registry.create(options.desktop.name, desktop_options, run_dir=run_dir, **context)
    except ScaleCUAError:
        raise
    except ValueError as exc:  # the desktop backend's options did not validate
        raise ScaleCUAError(f"scienceboard: desktop backend {options.desktop.name!r}: {exc}") from None
    return ScienceBoardBackend(options, desktops)
