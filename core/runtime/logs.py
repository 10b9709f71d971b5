"""structlog, configured once by the entry point.

Human-readable lines on stderr (colored on a terminal), JSON lines in the run
directory. Modules call ``structlog.get_logger(__name__)``; run and episode
ids are bound through contextvars (:func:`bind`), so every line from an
episode's coroutine carries its ids.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import structlog

_SHARED = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]

_configured_file: Path | None = None


def configure(level: str = "info", log_file: Path | None = None) -> None:
    """Configure structlog and stdlib logging. Safe to call again to add a run's log file."""
    global _configured_file
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_scalecua", False):
            root.removeHandler(handler)
            handler.close()

    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_SHARED,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
            ],
        )
    )
    console._scalecua = True  # type: ignore[attr-defined]
    root.addHandler(console)

    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        jsonl = logging.FileHandler(log_file, encoding="utf-8")
        jsonl.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                foreign_pre_chain=_SHARED,
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    structlog.processors.JSONRenderer(default=str),
                ],
            )
        )
        jsonl._scalecua = True  # type: ignore[attr-defined]
        root.addHandler(jsonl)
        _configured_file = log_file

    root.setLevel(level.upper())
    # Chatty libraries stay at warning unless debugging.
    for noisy in ("httpx", "httpcore", "urllib3", "PIL", "matplotlib", "openai", "filelock", "docker"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if level == "debug" else logging.WARNING)

    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def bind(**ids: object) -> None:
    """Bind ids (``run_id``, ``episode_id``, ``task_id``) to the current context."""
    structlog.contextvars.bind_contextvars(**ids)


def unbind(*keys: str) -> None:
    structlog.contextvars.unbind_contextvars(*keys)
