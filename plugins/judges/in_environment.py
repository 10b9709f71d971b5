"""The ``in-environment`` judge executor: generated getters run inside the environment they inspect.

Where the environment is isolated (a container or VM: the container is the
sandbox, as in OSWorld), a generated getter runs there through the probe's
``run_python`` endpoint (OSWorld's ``/run_python``: the script runs with the
desktop's ``python3``, 30 s limit, answering ``{status, message, output,
error, return_code}``). The script wraps the getter: it changes to the
desktop user's home (cwd and HOME), applies CPU/memory/file-size limits and
an alarm for the wall-clock limit, silences the getter's own output, and
prints the result as one JSON line after a per-call random marker.

Environments that share this host (``local-desktop``: ``env.isolated`` False)
run getters in the host sandbox with read-only access to their home, exactly
as the ``sandbox`` executor does. Generated metrics always run in the host
sandbox.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any, Mapping

from core.interfaces import Environment, JudgeCall
from core.types import JudgementStatus
from plugins.judges import sandbox_runner
from plugins.judges.options import InEnvironmentOptions
from plugins.judges.results import call_from_report, log_outcome
from plugins.judges.sandbox import SandboxExecutor
from plugins.judges.validator import EntryPoint

CRASHED = JudgementStatus.CRASHED.value
TIMEOUT = JudgementStatus.TIMEOUT.value

#: the wrapper the environment runs; %-formatted with JSON-in-repr literals, so any code/config is safe to embed
GETTER_SCRIPT = """\
import json, os, signal, traceback
try:
    import resource
except ImportError:  # Windows desktops: no rlimits, the run_python time limit still applies
    resource = None

def _scalecua_run():
    code = json.loads(%(code)s)
    config = json.loads(%(config)s)
    out = os.dup(1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    home = os.path.expanduser("~")
    os.environ["HOME"] = home
    try:
        os.chdir(home)
    except OSError:
        pass
    for name, value in %(limits)r:
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (AttributeError, ValueError, OSError):
            pass
    if hasattr(signal, "alarm"):
        signal.alarm(%(alarm_s)d)
    namespace = {"__name__": "scalecua_judge"}
    try:
        exec(compile(code, "<judge>", "exec"), namespace)
        function = namespace.get(%(function)r)
        if not callable(function):
            raise NameError("the code defines no function named " + %(function)r)
        value = function(config)
        try:
            text = json.dumps({"ok": True, "value": value}, allow_nan=True)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"ok": False, "unserializable": True, "exc_type": type(value).__name__,
                               "message": "returned a %%s, which is not JSON-serializable: %%s" %% (type(value).__name__, exc)})
    except BaseException as exc:
        text = json.dumps({"ok": False, "exc_type": type(exc).__name__,
                           "errno": exc.errno if isinstance(exc, OSError) else None,
                           "message": str(exc)[:2000], "traceback": traceback.format_exc()[-4000:]})
    os.write(out, ("\\n" + %(marker)r + text + "\\n").encode())

_scalecua_run()
"""


def getter_script(code: str, function: str, config: Mapping[str, Any], options: InEnvironmentOptions, marker: str) -> str:
    """The Python script that runs ``function(config)`` from ``code`` inside the environment."""
    limits = [
        ("RLIMIT_CPU", int(options.cpu_time_s)),
        ("RLIMIT_AS", int(options.memory_bytes)),
        ("RLIMIT_FSIZE", int(options.file_size_bytes)),
        ("RLIMIT_CORE", 0),
    ]
    return GETTER_SCRIPT % {
        "code": repr(json.dumps(code)),
        "config": repr(json.dumps(dict(config), allow_nan=True)),
        "function": function,
        "limits": limits,
        "alarm_s": max(1, int(options.wall_timeout_s + 0.999)),
        "marker": marker,
    }


def parse_run_python(response: Mapping[str, Any], marker: str, options: InEnvironmentOptions) -> dict[str, Any]:
    """The sandbox-style report for an OSWorld ``/run_python`` answer to :func:`getter_script`."""
    output = response.get("output") or ""
    stderr = str(response.get("error") or "")
    found = [line[len(marker):] for line in str(output).splitlines() if line.startswith(marker)]
    if found:
        if len(found[-1]) > options.max_result_bytes:
            return {"status": "resource_limit", "error": f"result over the {options.max_result_bytes} byte limit"}
        try:
            payload = json.loads(found[-1])
        except ValueError:
            payload = None
        return sandbox_runner.report_from_payload(payload, "")
    if stderr == "TimeoutExpired" or "took too long" in str(response.get("message") or ""):
        return {"status": "timeout", "error": "the environment's run_python time limit was exceeded"}
    code = response.get("return_code")
    if isinstance(code, int) and code < 0:
        return sandbox_runner.report_from_signal(-code, options.limits_for_runner(), "")
    detail = (stderr or str(response.get("message") or ""))[-1500:]
    return {"status": "crashed", "error": f"the getter script failed in the environment (return code {code}): {detail}"}


class InEnvironmentExecutor(SandboxExecutor):
    """Getters inside isolated environments through the probe; everything else in the host sandbox."""

    name = "in-environment"
    options: InEnvironmentOptions

    def __init__(self, options: InEnvironmentOptions | None = None, **context: Any):
        super().__init__(options or InEnvironmentOptions(), **context)

    async def run_getter(
        self,
        code: str,
        function: str,
        env: Environment,
        config: Mapping[str, Any],
        *,
        task_id: str | None = None,
    ) -> JudgeCall:
        if getattr(env, "isolated", False):
            call = await self._probe_getter(code, function, env, config)
        else:
            call = await self._host_getter(code, function, env, config)
        return log_outcome(call, kind="getter", function=function, task_id=task_id, executor=self.name)

    async def _probe_getter(self, code: str, function: str, env: Environment, config: Mapping[str, Any]) -> JudgeCall:
        rejected = self.check(code, EntryPoint(function, "getter"))
        if rejected is not None:
            return rejected
        client = getattr(env, "client", None)
        if client is None or not hasattr(client, "run_python"):
            return JudgeCall(CRASHED, None, f"environment {getattr(env, 'env_id', '?')} has no probe client with "
                                            f"run_python", 0.0)
        started = time.monotonic()
        marker = f"<<scalecua-judge-result:{secrets.token_hex(8)}>>"
        try:
            script = getter_script(code, function, config, self.options, marker)
        except (TypeError, ValueError) as exc:
            return JudgeCall(CRASHED, None, f"getter config is not JSON-serializable: {exc}", 0.0)
        limit = self.options.wall_timeout_s + self.options.probe_grace_s
        try:
            response = await asyncio.wait_for(client.run_python(script), timeout=limit)
        except asyncio.TimeoutError:
            return JudgeCall(TIMEOUT, None, f"the probe did not answer run_python within {limit:g} s",
                             time.monotonic() - started)
        except Exception as exc:  # the probe failed, not the judge; the episode still gets a result
            return JudgeCall(CRASHED, None, f"run_python through the probe failed: {type(exc).__name__}: {exc}",
                             time.monotonic() - started)
        if not isinstance(response, Mapping):
            return JudgeCall(CRASHED, None, f"run_python answered {response!r:.200}, not a JSON object",
                             time.monotonic() - started)
        return call_from_report(parse_run_python(response, marker, self.options), time.monotonic() - started)
