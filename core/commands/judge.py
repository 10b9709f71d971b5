"""``python -m core.judge metric --code FILE --function NAME --result JSON --expected JSON``: run one judge metric.

The metric runs through the configured judge executor (``judge`` in
``--config``; without a config, the executor named by ``--executor``, by
default ``sandbox`` with its default options) and one JSON object is printed::

    {"score": 0.0, "status": "timeout", "error": "wall-clock limit of 10 s exceeded"}

The exit status is 0 whatever the judge did (its failure is in ``status``);
2 for a bad invocation (missing file, malformed JSON, unknown executor).
``--result``/``--expected``/``--options`` take JSON text, or ``@path`` to read
it from a file.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import math
import sys
from pathlib import Path
from typing import Any, Sequence

from core.runtime import logs
from core.commands.cli import main_guard
from core.errors import ScaleCUAError
from core.interfaces import JudgeCall, JudgeExecutor


class UsageError(ScaleCUAError):
    """A bad invocation of ``python -m core.judge``."""

    exit_code = 2


def _json_argument(text: str, flag: str) -> Any:
    source = text
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(source)
    except ValueError as exc:
        raise UsageError(f"{flag}: not valid JSON ({exc}); quote it for the shell, e.g. {flag} '[1, 2]' "
                         f"or {flag} '\"text\"'") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core.judge", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    metric = commands.add_parser("metric", help="run one metric function and print {score, status, error}")
    metric.add_argument("--code", required=True, type=Path, help="Python file defining the metric")
    metric.add_argument("--function", required=True, help="name of the metric function in the file")
    metric.add_argument("--result", required=True, help="the artifact (JSON, or @file)")
    metric.add_argument("--expected", required=True, help="the expected value (JSON, or @file)")
    metric.add_argument("--options", default="{}", help="keyword options for the metric (JSON object, or @file)")
    metric.add_argument("--config", type=Path, help="YAML config whose 'judge' slot picks the executor")
    metric.add_argument("--executor", default="sandbox", help="judge executor when no --config is given")
    metric.add_argument("--task-id", default=None, help="task id for the log lines")
    return parser


def build_executor(config: Path | None, name: str) -> JudgeExecutor:
    """The executor the config's ``judge`` slot names, or ``name`` with default options."""
    if config is not None:
        from core.config import load_config

        resolved, plugins = load_config(config, required=("judge",))
        return resolved.create("judge", plugins)
    from core.pluginmanager import load_plugins
    from core.registry import UnknownComponentError

    registry = load_plugins().registry("judge_executor")
    try:
        return registry.create(name, {})
    except UnknownComponentError as exc:
        raise UsageError(f"--executor: {exc}") from None


def judgement_json(call: JudgeCall) -> dict[str, Any]:
    """``{score, status, error}``: the score only when the call is ok and the value a float in [0, 1]."""
    value = call.value
    if call.status != "ok":
        return {"score": 0.0, "status": call.status, "error": call.error}
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not 0 <= value <= 1:
        return {"score": 0.0, "status": "invalid_score", "error": f"metric returned {value!r}"}
    return {"score": float(value), "status": "ok", "error": None}


async def _run_metric(executor: JudgeExecutor, args: argparse.Namespace, code: str, result: Any, expected: Any,
                      options: dict[str, Any]) -> JudgeCall:
    parameters = inspect.signature(executor.run_metric).parameters
    takes_task_id = "task_id" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    extra = {"task_id": args.task_id} if takes_task_id else {}  # task_id is optional in the interface
    try:
        return await executor.run_metric(code, args.function, result, expected, options, **extra)
    finally:
        await executor.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logs.configure("warning")
    try:
        code = args.code.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--code: cannot read {args.code}: {getattr(exc, 'strerror', None) or exc}") from None
    result = _json_argument(args.result, "--result")
    expected = _json_argument(args.expected, "--expected")
    options = _json_argument(args.options, "--options")
    if not isinstance(options, dict):
        raise UsageError(f"--options: must be a JSON object of keyword options, got {type(options).__name__}")
    executor = build_executor(args.config, args.executor)
    call = asyncio.run(_run_metric(executor, args, code, result, expected, options))
    print(json.dumps(judgement_json(call)))
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
