"""Exceptions that carry a user-facing message (no traceback at the entry points)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class ScaleCUAError(Exception):
    """Base class: a problem the user can fix; the message says how."""

    exit_code = 1


class ConfigError(ScaleCUAError):
    """One or more configuration problems, each prefixed with its YAML path."""

    exit_code = 2

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        noun = "problem" if len(self.problems) == 1 else "problems"
        body = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"configuration has {len(self.problems)} {noun}:\n{body}")


class PluginError(ScaleCUAError):
    """A plugin could not be loaded, or a required one is missing."""

    exit_code = 2


class EnvironmentFailure(ScaleCUAError):
    """An environment failed (crashed, unreachable, timed out). Episodes hit by it are retried."""


class FilesMissing(ScaleCUAError):
    """Files a task needs are absent from the local mirror that serves them instead of the network (an environment
    backend's ``download_mirror``): the task cannot run here until the mirror holds them. Not a fault of the task
    or of the environment. ``urls``: what the mirror lacks; ``mirror``: the directory looked in.

    Backends may wrap it (a setup step's :class:`~environments.setup.SetupError` is raised ``from`` it; a judge
    records it in ``Judgement.details["files_missing"]``): :meth:`within` finds it in an exception's cause chain."""

    def __init__(self, urls: Sequence[str], mirror: str | Path, message: str | None = None):
        self.urls = list(urls)
        self.mirror = Path(mirror)
        super().__init__(message or f"not in the download mirror {self.mirror}: {', '.join(self.urls)}")

    @staticmethod
    def within(exc: BaseException | None) -> FilesMissing | None:
        """``exc`` itself or the first exception that caused it (``__cause__``, else ``__context__``) that is a
        FilesMissing; None when there is none."""
        seen: set[int] = set()
        while exc is not None and id(exc) not in seen:
            if isinstance(exc, FilesMissing):
                return exc
            seen.add(id(exc))
            exc = exc.__cause__ or exc.__context__
        return None


class CheckpointError(ScaleCUAError):
    """A checkpoint is missing, incomplete or incompatible with the config."""

    exit_code = 2


class ActionParseError(ScaleCUAError):
    """A model response holds no parsable action; the message says what was expected."""
