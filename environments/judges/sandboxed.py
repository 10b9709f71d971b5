"""Metrics that run code the agent wrote: registered here, executed only by the run's judge executor.

``check_python_file_by_test_suite(actual_files, test_file, test_function_name='test')`` (OSWorld's name and
semantics) imports ``test_file`` — a test suite that in turn imports the program the agent edited, fetched
next to it — with its directory first on ``sys.path`` and as the working directory, calls its
``test_function_name`` and scores: a bool 1/0, a number clipped to [0, 1], anything else by truthiness; a
missing file, an import or a call that raises, a missing or non-callable function all score 0.

Upstream runs that import in the evaluator's own process. Here such a metric is a :class:`SandboxedMetric`:
:mod:`environments.judges.evaluate` hands its source to ``JudgeServices.executor`` (the ``judge`` slot, e.g.
the ``sandbox`` executor: its own process, no network, the fetched files read-only), exactly as it runs a
task's generated judge code; without an executor the judgement is crashed, never run in-process.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxedMetric:
    """A metric whose ``function`` in ``code`` (self-contained Python source) runs in the judge executor."""

    code: str
    function: str


_TEST_SUITE = '''
def check_python_file_by_test_suite(actual_files, test_file, **options):
    import importlib.util
    import os
    import sys
    import uuid

    name = options.get("test_function_name", "test")
    if not test_file or not os.path.isfile(str(test_file)):
        return 0.0
    path = os.path.abspath(str(test_file))
    folder = os.path.dirname(path)
    os.chdir(folder)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location("test_suite_" + uuid.uuid4().hex[:8], path)
        if spec is None or spec.loader is None:
            return 0.0
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        function = getattr(module, name, None)
        if not callable(function):
            return 0.0
        outcome = function()
    except Exception:
        return 0.0
    if isinstance(outcome, bool):
        return 1.0 if outcome else 0.0
    if isinstance(outcome, (int, float)):
        return max(0.0, min(1.0, float(outcome)))
    return 1.0 if outcome else 0.0
'''

check_python_file_by_test_suite = SandboxedMetric(_TEST_SUITE, "check_python_file_by_test_suite")
