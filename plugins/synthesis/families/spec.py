"""What a task family is, and how one of its variants becomes a task.

A :class:`Family` draws its parameters from the value pools (:mod:`plugins.synthesis.families.values`) and derives
everything else from them: the instruction (one of its paraphrases), the setup command, the oracle (one shell
command per turn: type it, press Return; then ``done``), the exact end state its judge expects, and near misses
(a sibling variant's oracle, the wrong file, the decoy touched) that the judge must score 0. Nothing of a
variant is written by hand, so a family's thousandth variant is as verifiable as its first.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Literal, Mapping, Sequence

from core.errors import ConfigError
from core.types import Task

from plugins.synthesis.families import judge
from plugins.synthesis.families.values import Draw

Kind = Literal["short", "long", "infeasible"]
#: train and validation share the training values and paraphrases; test draws held-out values and may use the
#: held-out paraphrase; heldout are whole families no training split contains
SPLITS = ("train", "validation", "test", "heldout")
Actions = list[dict[str, Any]]


def commands(*lines: str) -> Actions:
    """The oracle of a terminal task: each command typed and run (two turns), then ``done``."""
    actions: Actions = []
    for line in lines:
        actions += [{"type": "type", "text": line}, {"type": "key", "keys": ["Return"]}]
    return actions + [{"type": "done"}]


def shell_files(folder: str, names: Sequence[str], contents: Mapping[str, str] | None = None) -> str:
    """A setup command creating ``~/folder`` with one file per name (content: its own name, or ``contents``)."""
    parts = [f"mkdir -p ~/{folder}"]
    for name in names:
        text = (contents or {}).get(name, name.split(".")[0])
        parts.append(f"printf '%s\\n' {_quote_lines(text)} > ~/{folder}/{name}")
    return " && ".join(parts)


def _quote_lines(text: str) -> str:
    return " ".join("'" + line.replace("'", "'\\''") + "'" for line in text.split("\n"))


@dataclass(frozen=True)
class Variant:
    """One rendered variant: everything the task, the checker and the split checks need."""

    family: str
    kind: Kind
    split: str
    index: int
    paraphrase: int
    values: dict[str, list[str]]
    instruction: str
    setup: str
    oracle: Actions
    near_misses: dict[str, Actions]
    evaluator: dict[str, Any]

    @property
    def task_id(self) -> str:
        return f"fam-{self.family}-{self.split}-{self.index:04d}"

    def task(self) -> Task:
        return Task.model_validate({
            "id": self.task_id,
            "snapshot": "os",
            "instruction": self.instruction,
            "source": f"scalecua-family:{self.family}",
            "config": [
                {"type": "execute", "parameters": {"command": self.setup, "shell": True, "check": True}},
                {"type": "open", "parameters": {"path": "xterm"}},
            ],
            "related_apps": ["terminal"],
            "evaluator": self.evaluator,
            "metadata": {
                "domain": "os", "family": self.family, "family_kind": self.kind, "split": self.split,
                "paraphrase": self.paraphrase, "values": self.values, "oracle": self.oracle,
                "near_misses": self.near_misses, "turns": len(self.oracle),
            },
        })


class Family:
    """A parametric task family: subclasses set the class attributes and implement the four derivations."""

    name: ClassVar[str]
    kind: ClassVar[Kind] = "short"
    #: instruction templates (``str.format`` fields are parameter names); the last one is held out: only the
    #: test split uses it
    paraphrases: ClassVar[tuple[str, ...]]

    def params(self, draw: Draw) -> dict[str, Any]:
        """The variant's parameters, drawn from ``draw`` (which records every value it hands out)."""
        raise NotImplementedError

    def setup(self, p: Mapping[str, Any]) -> str:
        """The shell command that builds the start state."""
        raise NotImplementedError

    def oracle(self, p: Mapping[str, Any]) -> Actions:
        raise NotImplementedError

    def end_state(self, p: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
        """The probes of the judge: (path under ~, read, value after a correct solution)."""
        raise NotImplementedError

    def near_misses(self, p: Mapping[str, Any]) -> dict[str, Actions]:
        """Plausible wrong solutions the judge must score 0, by name (the first one is the checker's)."""
        raise NotImplementedError

    def evaluator(self, p: Mapping[str, Any]) -> dict[str, Any]:
        return judge.evaluator(self.end_state(p))

    # -- rendering ---------------------------------------------------------------------------------------

    def render_instruction(self, index: int, p: Mapping[str, Any]) -> str:
        template = self.paraphrases[index]
        try:
            return template.format(**p)
        except (KeyError, IndexError, ValueError) as exc:
            fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
            missing = [f for f in fields if f not in p]
            raise ConfigError([f"family {self.name!r}: paraphrase {index} ({template!r}) does not render: "
                               + (f"field {{{missing[0]}}} is not one of its parameters ({', '.join(sorted(p))})"
                                  if missing else str(exc))]) from None

    def variant(self, split: str, index: int, seed: int) -> Variant:
        """Variant ``index`` of ``split``: deterministic in (family, split, index, seed)."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; the splits are {', '.join(SPLITS)}")
        rng = random.Random(f"{seed}:{self.name}:{split}:{index}")
        draw = Draw(rng, held_out=split == "test")
        p = self.params(draw)
        usable = len(self.paraphrases) if split in ("test", "heldout") else len(self.paraphrases) - 1
        paraphrase = rng.randrange(usable)
        return Variant(
            family=self.name, kind=self.kind, split=split, index=index, paraphrase=paraphrase,
            values={k: sorted(v) for k, v in draw.drawn.items()},
            instruction=self.render_instruction(paraphrase, p), setup=self.setup(p), oracle=self.oracle(p),
            near_misses=self.near_misses(p), evaluator=self.evaluator(p),
        )


@dataclass
class Catalog:
    """The registered families by name."""

    families: dict[str, Family] = field(default_factory=dict)

    def add(self, family_class: Callable[[], Family]) -> Callable[[], Family]:
        family = family_class()
        if len(family.paraphrases) < 3:
            raise ValueError(f"family {family.name!r} needs at least 3 paraphrases (one is held out for test)")
        self.families[family.name] = family
        return family_class

    def get(self, name: str) -> Family:
        if name not in self.families:
            raise ConfigError([f"unknown task family {name!r}; the families are {', '.join(sorted(self.families))}"])
        return self.families[name]

    def names(self) -> list[str]:
        return sorted(self.families)
