"""Exceptions that carry a user-facing message (no traceback at the entry points)."""

from __future__ import annotations


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


class CheckpointError(ScaleCUAError):
    """A checkpoint is missing, incomplete or incompatible with the config."""

    exit_code = 2


class ActionParseError(ScaleCUAError):
    """A model response holds no parsable action; the message says what was expected."""
