"""Exceptions that carry a user-facing message (no traceback at the entry points)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during, outermost first (each once)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        yield exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__


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
        return next((link for link in _chain(exc) if isinstance(link, FilesMissing)), None)


class CheckpointError(ScaleCUAError):
    """A checkpoint is missing, incomplete or incompatible with the config."""

    exit_code = 2


class ActionParseError(ScaleCUAError):
    """A model response holds no parsable action; the message says what was expected."""


class DiskFull(ScaleCUAError):
    """A write failed for want of space (or quota) on the device holding ``path``. Whatever was being written is
    incomplete and never taken as valid (checkpoints without their marker, torn log lines, temporary files are
    all ignored or dropped on resume); the message names the path, the free space and the way on."""

    def __init__(self, path: str | Path | None, cause: BaseException | None = None):
        self.path = Path(path) if path is not None else None
        where = self.path if self.path is not None else Path.cwd()
        probe = where
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        try:
            import shutil

            usage = shutil.disk_usage(probe)
            space = f"{usage.free / 2**20:.1f} MiB free of {usage.total / 2**20:.1f} MiB"
        except OSError:
            space = "free space unknown"
        reason = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        super().__init__(f"no space left on the device writing {where}: {space}{reason}. Nothing incomplete is "
                         "kept as valid: free some space (or point run.output_dir elsewhere), then run the same "
                         "command with --resume; it continues from the newest complete checkpoint")

    @staticmethod
    def within(exc: BaseException | None) -> BaseException | None:
        """The exception in ``exc``'s cause chain that reports a full disk or quota (errno ENOSPC / EDQUOT, or
        a library's message for them: torch and safetensors re-raise it as their own error); None if none."""
        import errno

        for link in _chain(exc):
            if isinstance(link, DiskFull) or (isinstance(link, OSError) and link.errno in (errno.ENOSPC, errno.EDQUOT)):
                return link
            if "No space left on device" in str(link) or "os error 28" in str(link):
                return link
        return None

    #: how torch's C++ stream writer fails when a write comes up short: no errno, no OS wording
    SILENT_WRITE_ERRORS = ("iostream error", "unexpected pos", "PytorchStreamWriter failed")
    #: below this much free space, a silent write error on the device is taken as the disk being full
    NEARLY_FULL_BYTES = 4 * 2**20

    @classmethod
    def check(cls, exc: BaseException, path: str | Path) -> None:
        """Raise a :class:`DiskFull` for ``path`` from ``exc`` when ``exc`` is (caused by) a full disk: errno
        ENOSPC/EDQUOT or a library's wording for them, or a write error without either (torch's stream writer)
        while the device holding ``path`` is nearly full."""
        full = cls.of(exc, path)
        if full is exc:
            raise exc
        if full is not None:
            raise full from exc

    @classmethod
    def of(cls, exc: BaseException, path: str | Path) -> DiskFull | None:
        """The :class:`DiskFull` that ``check`` raises, or None; call it before removing what the failed write
        left, so the free space measured (and named) is the device's at the failure."""
        if isinstance(exc, DiskFull):
            return exc
        if (cause := cls.within(exc)) is not None:
            return cls(path, cause)
        silent = any(text in str(link) for link in _chain(exc) for text in cls.SILENT_WRITE_ERRORS)
        if silent and cls._free_bytes(Path(path)) < cls.NEARLY_FULL_BYTES:
            return cls(path, exc)
        return None

    @staticmethod
    def _free_bytes(path: Path) -> float:
        import shutil

        while not path.exists() and path != path.parent:
            path = path.parent
        try:
            return shutil.disk_usage(path).free
        except OSError:
            return float("inf")
