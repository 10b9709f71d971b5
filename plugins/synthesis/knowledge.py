"""Per-application knowledge documents: what the proposer knows about each environment.

A document is Markdown with a YAML front matter::

    ---
    app: libreoffice_calc            # the id used in task "snapshot" / "related_apps"
    title: LibreOffice Calc
    context_setup:                   # setup steps that put the app on screen before the proposer looks
      - {type: launch, parameters: {command: [libreoffice, --calc]}}
    ---
    # LibreOffice Calc
    ...

The bundled documents live in ``plugins/synthesis/knowledge/``; ``knowledge_dirs``
options add (or override, by ``app``) documents from other directories.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from core.errors import ConfigError
from core.types import Evaluator, SetupStep, Task

BUNDLED_DIR = Path(__file__).parent / "knowledge"


@dataclass
class KnowledgeDoc:
    app: str
    title: str
    body: str
    path: Path
    context_setup: list[SetupStep] = field(default_factory=list)

    def context_task(self) -> Task:
        """A task whose setup only brings the application up (for the proposer's look at the desktop)."""
        return Task(id=f"context-{self.app}", instruction="", snapshot=self.app, related_apps=[self.app],
                    config=list(self.context_setup), evaluator=Evaluator(func="infeasible"))


def parse_doc(path: Path) -> KnowledgeDoc:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ConfigError([f"knowledge document {path}: must start with a '---' YAML front matter naming its app"])
    header, sep, body = text[4:].partition("\n---\n")
    if not sep:
        raise ConfigError([f"knowledge document {path}: the front matter is not closed by a '---' line"])
    try:
        meta: dict[str, Any] = yaml.safe_load(header) or {}
        setup = [SetupStep.model_validate(s) for s in meta.get("context_setup") or []]
    except Exception as exc:
        raise ConfigError([f"knowledge document {path}: invalid front matter: {exc}"]) from None
    if not isinstance(meta.get("app"), str) or not meta["app"]:
        raise ConfigError([f"knowledge document {path}: the front matter needs 'app: <application id>'"])
    return KnowledgeDoc(app=meta["app"], title=str(meta.get("title", meta["app"])), body=body.strip(), path=path,
                        context_setup=setup)


class KnowledgeBase:
    """Documents by application id."""

    def __init__(self, docs: Iterable[KnowledgeDoc]):
        self.docs: dict[str, KnowledgeDoc] = {}
        for doc in docs:
            self.docs[doc.app] = doc  # later directories override earlier ones

    @classmethod
    def load(cls, extra_dirs: Iterable[str | Path] = (), *, bundled: bool = True) -> KnowledgeBase:
        dirs = ([BUNDLED_DIR] if bundled else []) + [Path(d).expanduser() for d in extra_dirs]
        docs = []
        for directory in dirs:
            if not directory.is_dir():
                raise ConfigError([f"knowledge_dirs: {directory} is not a directory"])
            docs.extend(parse_doc(p) for p in sorted(directory.glob("*.md")))
        return cls(docs)

    @property
    def apps(self) -> list[str]:
        return sorted(self.docs)

    def get(self, app: str) -> KnowledgeDoc:
        if app not in self.docs:
            raise ConfigError([f"apps: no knowledge document for '{app}'; available: {', '.join(self.apps)}"])
        return self.docs[app]
