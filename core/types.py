"""The typed objects that flow between plugins.

sampler -> (task ids) -> environment + rollout engine -> :class:`Trajectory`
-> judge -> :class:`Judgement` -> segmenter -> :class:`Segment` ->
trainer -> weights -> rollout engine.

Task JSON stays compatible with OSWorld's ``evaluation_examples`` format:
unknown keys are kept, so a task loaded and written back is unchanged.
"""

from __future__ import annotations

import enum
import hashlib
import io
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

# ---------------------------------------------------------------------------
# Tasks (OSWorld task JSON + the paper's Table 5 extensions)
# ---------------------------------------------------------------------------


class SetupStep(BaseModel):
    """One OSWorld setup/postconfig step: ``{"type": "download", "parameters": {...}}``."""

    model_config = ConfigDict(extra="forbid")

    type: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class Evaluator(BaseModel):
    """OSWorld evaluator block.

    ``func`` names metrics, ``result``/``expected`` configure getters (each a
    dict with a ``type``), ``conj`` combines lists (``and``/``or``). ``code``
    carries generated Python (getters and metrics) for synthesized tasks; its
    functions are referenced by name from ``func`` and ``result.type``.
    """

    model_config = ConfigDict(extra="allow")

    func: str | list[str]
    result: dict[str, Any] | list[dict[str, Any]] | None = None
    expected: dict[str, Any] | list[dict[str, Any]] | None = None
    options: dict[str, Any] | list[dict[str, Any]] | None = None
    conj: Literal["and", "or"] = "and"
    postconfig: list[SetupStep] = Field(default_factory=list)
    code: str | None = None

    @property
    def funcs(self) -> list[str]:
        return [self.func] if isinstance(self.func, str) else list(self.func)


class Task(BaseModel):
    """A verifiable task: instruction + setup + judge (OSWorld-compatible JSON)."""

    model_config = ConfigDict(extra="allow")

    id: str
    instruction: str
    snapshot: str = ""
    #: where the task comes from: a URL or a name, or several (some OSWorld tasks cite two forum threads)
    source: str | list[str] = ""
    config: list[SetupStep] = Field(default_factory=list)
    related_apps: list[str] = Field(default_factory=list)
    evaluator: Evaluator
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: directory of the task file (for relative assets); not part of the JSON
    _source_dir: str | None = PrivateAttr(default=None)

    @property
    def source_dir(self) -> str | None:
        return self._source_dir

    @field_validator("id")
    @classmethod
    def _id_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("task id must not be empty")
        return value

    @property
    def domain(self) -> str:
        """The domain used for per-domain reporting (OSWorld's ``snapshot``, else the first app)."""
        return self.metadata.get("domain") or self.snapshot or (self.related_apps[0] if self.related_apps else "")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


# ---------------------------------------------------------------------------
# Actions (the paper's appendix A, ScienceBoard's additions)
# ---------------------------------------------------------------------------


class ActionType(str, enum.Enum):
    LEFT_CLICK = "left_click"
    RIGHT_CLICK = "right_click"
    MIDDLE_CLICK = "middle_click"
    DOUBLE_CLICK = "double_click"
    TRIPLE_CLICK = "triple_click"
    LEFT_CLICK_DRAG = "left_click_drag"
    MOUSE_MOVE = "mouse_move"
    LEFT_MOUSE_DOWN = "left_mouse_down"
    LEFT_MOUSE_UP = "left_mouse_up"
    KEY = "key"
    HOLD_KEY = "hold_key"
    TYPE = "type"
    SCROLL = "scroll"
    SCREENSHOT = "screenshot"
    WAIT = "wait"
    CURSOR_POSITION = "cursor_position"
    DONE = "done"
    FAIL = "fail"
    ANSWER = "answer"
    WRITE_FILE = "write_file"


POINTER_ACTIONS = frozenset(
    {
        ActionType.LEFT_CLICK,
        ActionType.RIGHT_CLICK,
        ActionType.MIDDLE_CLICK,
        ActionType.DOUBLE_CLICK,
        ActionType.TRIPLE_CLICK,
        ActionType.LEFT_CLICK_DRAG,
        ActionType.MOUSE_MOVE,
        ActionType.LEFT_MOUSE_DOWN,
        ActionType.LEFT_MOUSE_UP,
    }
)
#: Pointer actions whose coordinates may be omitted (act at the current cursor position).
OPTIONAL_POINT_ACTIONS = frozenset({ActionType.LEFT_MOUSE_DOWN, ActionType.LEFT_MOUSE_UP})
TERMINAL_ACTIONS = frozenset({ActionType.DONE, ActionType.FAIL, ActionType.ANSWER})


class Action(BaseModel):
    """One agent action. Coordinates are on the relative 1000x1000 grid.

    ``left_click_drag`` drags from ``start`` (or the current cursor) to ``(x, y)``.
    """

    model_config = ConfigDict(extra="forbid")

    type: ActionType
    x: int | None = None
    y: int | None = None
    start_x: int | None = None
    start_y: int | None = None
    text: str | None = None
    keys: list[str] | None = None
    direction: Literal["up", "down", "left", "right"] | None = None
    amount: int | None = None
    duration: float | None = None
    path: str | None = None
    content: str | None = None

    @model_validator(mode="after")
    def _check_fields(self) -> Action:
        t = self.type
        if t in POINTER_ACTIONS and t not in OPTIONAL_POINT_ACTIONS and (self.x is None or self.y is None):
            raise ValueError(f"{t.value} needs x and y")
        for name in ("x", "y", "start_x", "start_y"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1000:
                raise ValueError(f"{t.value}: {name}={value} is off the 0..1000 grid")
        if t in (ActionType.KEY, ActionType.HOLD_KEY) and not self.keys:
            raise ValueError(f"{t.value} needs keys, e.g. ['ctrl', 's']")
        if t == ActionType.TYPE and self.text is None:
            raise ValueError("type needs text")
        if t == ActionType.SCROLL and (self.direction is None or not self.amount):
            raise ValueError("scroll needs a direction (up/down/left/right) and a non-zero amount")
        if t == ActionType.ANSWER and self.text is None:
            raise ValueError("answer needs text")
        if t == ActionType.WRITE_FILE and (not self.path or self.content is None):
            raise ValueError("write_file needs path and content")
        if self.duration is not None and not 0 <= self.duration <= 60:
            raise ValueError(f"{t.value}: duration {self.duration} must be within 0..60 s")
        return self

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL_ACTIONS


# ---------------------------------------------------------------------------
# Observations and trajectories
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Screenshot:
    """A PNG screenshot plus its pixel size."""

    png: bytes
    width: int
    height: int

    @classmethod
    def from_png(cls, png: bytes) -> Screenshot:
        from PIL import Image

        with Image.open(io.BytesIO(png)) as img:
            return cls(png=png, width=img.width, height=img.height)

    def to_pil(self) -> Any:
        from PIL import Image

        img = Image.open(io.BytesIO(self.png))
        return img.convert("RGB")

    @property
    def digest(self) -> str:
        return hashlib.sha1(self.png).hexdigest()[:12]


@dataclass
class Observation:
    """What the agent sees after reset or an action."""

    screenshot: Screenshot | None = None
    accessibility_tree: str | None = None
    text: str | None = None  # action feedback (cursor position, command output, errors)
    info: dict[str, Any] = field(default_factory=dict)


class EpisodeStatus(str, enum.Enum):
    COMPLETED = "completed"  # the agent said done/fail/answer
    INCOMPLETE = "incomplete"  # turn limit, context limit, too many unparsable outputs
    ENV_ERROR = "env_error"  # the environment failed; never scored, retried


@dataclass
class Turn:
    """One agent step: the sampled response, the action(s) parsed from it, the resulting observation."""

    index: int
    response_text: str
    response_ids: list[int]
    response_logprobs: list[float]
    actions: list[Action] = field(default_factory=list)
    parse_error: str | None = None
    observation: Observation | None = None
    #: the loop's own text before the next screenshot (a parse error, the cursor position); the
    #: environment's text is ``observation.text``. None after the last turn.
    feedback: str | None = None
    duration_s: float = 0.0
    #: the rollout engine's weight version the response was sampled with (None: never-synced weights, scripted)
    weight_version: int | None = None


class JudgementStatus(str, enum.Enum):
    OK = "ok"
    INVALID_SCORE = "invalid_score"  # NaN, out of range, wrong type
    TIMEOUT = "timeout"
    RESOURCE_LIMIT = "resource_limit"
    CRASHED = "crashed"
    REJECTED = "rejected"  # the rule validator refused the code


class Judgement(BaseModel):
    """The score of a final state. Anything but ``ok`` scores 0."""

    model_config = ConfigDict(extra="forbid")

    score: float = 0.0
    status: JudgementStatus = JudgementStatus.OK
    error: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _zero_unless_ok(self) -> Judgement:
        if self.status != JudgementStatus.OK and self.score != 0.0:
            object.__setattr__(self, "score", 0.0)
        return self

    @property
    def success(self) -> bool:
        return self.status == JudgementStatus.OK and self.score >= 1.0 - 1e-9


@dataclass
class Trajectory:
    """One episode of one task: turns, final status, judgement and reward."""

    trajectory_id: str
    task_id: str
    group_id: str
    turns: list[Turn] = field(default_factory=list)
    status: EpisodeStatus = EpisodeStatus.COMPLETED
    status_reason: str = ""
    judgement: Judgement | None = None
    reward: float = 0.0
    initial_observation: Observation | None = None
    segments: list[Segment] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> bool:
        return self.judgement is not None and self.judgement.success

    @property
    def oldest_weight_version(self) -> int | None:
        """The oldest policy version among its turns (the one its staleness is measured by); None: unknown."""
        versions = [t.weight_version for t in self.turns if t.weight_version is not None]
        return min(versions) if versions else None


# ---------------------------------------------------------------------------
# Training items
# ---------------------------------------------------------------------------


@dataclass
class Segment:
    """One training item cut from a trajectory by a segmenter.

    ``input_ids`` hold the *expanded* image placeholders (one pad token per
    visual token). ``loss_mask`` is 1 exactly on sampled response tokens, and
    ``rollout_logprobs`` holds their sampling logprobs (0 elsewhere).
    ``images`` are in the order their placeholders occur.
    """

    trajectory_id: str
    task_id: str
    index: int
    input_ids: list[int]
    loss_mask: list[int]
    rollout_logprobs: list[float]
    images: list[Screenshot] = field(default_factory=list)
    reward: float = 0.0
    advantage: float = 0.0
    #: the oldest policy version that sampled a token of its trajectory (None: the engine reports none)
    weight_version: int | None = None
    #: where each trained response sits: ``(turn, start, end)``, ``input_ids[start:end]`` being the tokens
    #: sampled at that turn of the trajectory (empty: the segmenter does not record them)
    responses: list[tuple[int, int, int]] = field(default_factory=list)
    #: the proximal policy's logprobs of its tokens (``algorithm.old_logprobs: recompute``: recomputed by the
    #: trainer under the weights of the iteration's start; 0 where the mask is 0); None: the ratio is against
    #: ``rollout_logprobs``
    proximal_logprobs: list[float] | None = None

    def __post_init__(self) -> None:
        n = len(self.input_ids)
        if len(self.loss_mask) != n or len(self.rollout_logprobs) != n:
            raise ValueError(
                f"segment {self.trajectory_id}#{self.index}: input_ids ({n}), loss_mask "
                f"({len(self.loss_mask)}) and rollout_logprobs ({len(self.rollout_logprobs)}) differ in length"
            )
        for turn, start, end in self.responses:
            if not 0 <= start <= end <= n:
                raise ValueError(f"segment {self.trajectory_id}#{self.index}: response of turn {turn} at "
                                 f"[{start}, {end}) lies outside its {n} tokens")

    @property
    def num_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def num_trainable(self) -> int:
        return sum(self.loss_mask)


@dataclass
class RolloutGroup:
    """The n rollouts of one task in one iteration, with group-relative advantages."""

    task_id: str
    trajectories: list[Trajectory]

    @property
    def rewards(self) -> list[float]:
        return [t.reward for t in self.trajectories]

    @property
    def successes(self) -> list[bool]:
        return [t.success for t in self.trajectories]

    @property
    def informative(self) -> bool:
        """True when rewards differ within the group (non-zero advantage somewhere)."""
        rewards = self.rewards
        return len(rewards) > 1 and max(rewards) - min(rewards) > 1e-9
