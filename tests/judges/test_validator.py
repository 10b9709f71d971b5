"""The rule validator: every reason, with its line; good judges pass untouched."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.judges.validator import DEFAULT_ALLOWED_IMPORTS, EntryPoint, module_allowed, validate_judge_code

METRIC = EntryPoint("check", "metric")
GETTER = EntryPoint("get_state", "getter")

#: a realistic generated judge in the shape of the paper's Figure 9: getter + metric in one module
FIGURE_9_STYLE = '''\
"""Judge for: apply a presentation-wide font change."""
import json
import os
import re
import zipfile
from xml.etree import ElementTree

try:
    import numpy as np
except ImportError:  # optional
    np = None

FONT = re.compile(r'typeface="([^"]+)"')


def get_state(config):
    path = os.path.join(os.path.expanduser("~"), config["path"])
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    with zipfile.ZipFile(path) as archive:
        slides = [n for n in archive.namelist() if n.startswith("ppt/slides/")]
        fonts = {f for n in slides for f in FONT.findall(archive.read(n).decode("utf-8", "replace"))}
    with open(path, "rb") as handle:
        size = len(handle.read())
    return {"fonts": sorted(fonts), "size": size}


def check(result, expected, **options):
    if not isinstance(result, dict):
        return 0.0
    wanted = options.get("font", expected)
    fonts = result.get("fonts", [])
    return 1.0 if fonts and all(f == wanted for f in fonts) else 0.0


if __name__ == "__main__":
    print(json.dumps(check({"fonts": ["Arial"]}, "Arial")))
'''


def reasons(code: str, *entries: EntryPoint, **kwargs) -> list[str]:
    return validate_judge_code(code, list(entries) or [METRIC], **kwargs).reasons


def test_a_realistic_judge_passes():
    report = validate_judge_code(FIGURE_9_STYLE, [GETTER, EntryPoint("check", "metric", ("font",))])
    assert report.ok, report.reasons
    assert report.summary().startswith("rejected by the rule validator (0 problems)")


def test_every_reason_is_reported_with_its_line():
    code = (
        "import os, subprocess\n"            # 1
        "import random\n"                    # 2
        "print('import time')\n"             # 3
        "def check(result):\n"               # 4
        "    exec('1')\n"                    # 5
        "    os.system('ls')\n"              # 6
        "    open('out', 'w')\n"             # 7
        "    return ().__class__\n"          # 8
    )
    found = reasons(code)
    expected = [
        "line 1: import of 'subprocess' is not allowed (runs external programs)",
        "line 2: import of 'random' is not allowed (makes rewards non-deterministic)",
        "line 3: a top-level 'expr' statement runs at import time",
        "line 4: 'check' takes 1 positional parameter(s) but is called as check(result, expected, **options)",
        "line 5: calling exec() is not allowed",
        "line 6: 'os.system' is not allowed",
        "line 7: open() for writing is not allowed (mode 'w')",
        "line 8: the attribute '__class__' is not allowed",
    ]
    assert len(found) == len(expected), found
    for want, got in zip(expected, found):
        assert got.startswith(want), (want, got)
    report = validate_judge_code(code, [METRIC])
    assert "allowed imports:" in report.summary() and "numpy" in report.hint


def test_entry_functions_and_signatures():
    assert reasons("def other(result, expected):\n    return 1.0\n") == [
        "the metric function 'check' is not defined at module level; it is called as check(result, expected, **options)"
    ]
    nested = reasons("def outer():\n    def check(result, expected):\n        return 1.0\n")
    assert "(it is nested; move it to module level)" in nested[0]
    assert "not 'async def'" in reasons("async def check(result, expected):\n    return 1.0\n")[0]
    assert "not yield" in reasons("def check(result, expected):\n    yield 1.0\n")[0]
    assert "defined 2 times" in reasons("def check(r, e):\n    return 0\ndef check(r, e):\n    return 1\n")[0]
    too_many = reasons("def get_state(config, extra):\n    return 1\n", GETTER)
    assert too_many == ["line 1: 'get_state' requires 2 positional parameters; only 1 are passed (get_state(config))"]
    assert reasons("def get_state(config, extra=None):\n    return 1\n", GETTER) == []
    assert reasons("def check(*args):\n    return 1.0\n") == []
    option = EntryPoint("check", "metric", ("tolerance",))
    assert reasons("def check(result, expected, tolerance=0.1):\n    return 1.0\n", option) == []
    assert reasons("def check(result, expected, **options):\n    return 1.0\n", option) == []
    assert "does not accept the option 'tolerance'" in reasons("def check(result, expected):\n    return 1\n", option)[0]
    kwonly = reasons("def check(result, expected, *, strict):\n    return 1.0\n")
    assert "keyword-only parameter 'strict' has no default" in kwonly[0]
    clash = reasons("def check(result, expected, **o):\n    return 1\n", EntryPoint("check", "metric", ("result",)))
    assert "collides with a positional parameter" in clash[0]


def test_imports_follow_the_allowlist():
    assert reasons("import numpy.linalg\nfrom xml.etree import ElementTree\ndef check(r, e):\n    return 1.0\n") == []
    assert module_allowed("xml.etree.ElementTree", DEFAULT_ALLOWED_IMPORTS)
    assert not module_allowed("xml.sax", DEFAULT_ALLOWED_IMPORTS)
    assert "relative imports" in reasons("from . import x\ndef check(r, e):\n    return 1.0\n")[0]
    assert "import *" in reasons("from math import *\ndef check(r, e):\n    return 1.0\n")[0]
    custom = reasons("import requests\ndef check(r, e):\n    return 1.0\n", allowed_imports=["requests"])
    assert custom == []
    assert "talks to the network" in reasons("import requests\ndef check(r, e):\n    return 1.0\n")[0]
    for module in ("ctypes", "socket", "sys", "importlib", "pickle", "shutil", "multiprocessing", "urllib.request"):
        found = reasons(f"import {module}\ndef check(r, e):\n    return 1.0\n")
        assert found and f"import of '{module}' is not allowed" in found[0], (module, found)


def test_os_and_io_are_limited_to_read_only_attributes():
    ok = "import os\ndef check(r, e):\n    return float(os.path.exists(os.path.join(os.getcwd(), 'x')))\n"
    assert reasons(ok) == []
    for call in ("os.remove('x')", "os.kill(1, 9)", "os.fork()", "os.popen('ls')", "os.execv('/bin/sh', [])",
                 "os.chmod('x', 0o777)", "os.rename('a', 'b')", "os.putenv('A', 'B')"):
        attr = call.split("(")[0]
        found = reasons(f"import os\ndef check(r, e):\n    {call}\n")
        assert any(f"'{attr}' is not allowed" in f for f in found), (call, found)
    assert "'os.system' is not allowed" in reasons("from os import system\ndef check(r, e):\n    return 1.0\n")[0]
    aliased = reasons("import os as o\ndef check(r, e):\n    o.unlink('x')\n")
    assert "'os.unlink' is not allowed" in aliased[0]
    passed = reasons("import os\ndef check(r, e):\n    f = os\n    return 1.0\n")
    assert "module 'os' may only be used as os.<attribute>" in passed[0]
    assert "'io.open' is not allowed" in reasons("import io\ndef check(r, e):\n    io.open('x', 'w')\n")[0]


def test_files_are_read_only():
    assert reasons("def check(r, e):\n    return len(open(r).read()) / 1e9\n") == []
    assert reasons("def check(r, e):\n    return len(open(r, 'rb').read()) / 1e9\n") == []
    assert reasons("def check(r, e):\n    return len(open(r, mode='rt').read())\n") == []
    assert "literal read mode" in reasons("def check(r, e):\n    open(r, e)\n")[0]
    assert "mode 'a'" in reasons("def check(r, e):\n    open(r, mode='a')\n")[0]
    assert "mode 'r+'" in reasons("def check(r, e):\n    open(r, 'r+')\n")[0]
    path = "from pathlib import Path\ndef check(r, e):\n    Path(r).{}\n"
    for call in ("write_text('x')", "unlink()", "rmdir()", "touch()", "symlink_to('/')", "open('wb')"):
        assert reasons(path.format(call)), call
    assert reasons(path.format("read_text()")) == []
    assert reasons("import gzip\ndef check(r, e):\n    gzip.open(r, 'rt')\n") == []
    assert "mode 'wt'" in reasons("import gzip\ndef check(r, e):\n    gzip.open(r, 'wt')\n")[0]


def test_introspection_escapes_are_refused():
    escapes = {
        "().__class__.__bases__[0].__subclasses__()": "'__subclasses__'",
        "__builtins__['eval']('1')": "'__builtins__'",
        "getattr(r, 'sy' + 'stem')": "computed attribute name",
        "getattr(r, '__globals__')": "'__globals__'",
        "setattr(r, 'x', 1)": "setattr()",
        "eval('1')": "eval()",
        "compile('1', 'x', 'eval')": "compile()",
        "__import__('os')": "'__import__'",
        "globals()['x']": "globals()",
        "check.__code__": "'__code__'",
        "breakpoint()": "breakpoint()",
    }
    for expression, needle in escapes.items():
        found = reasons(f"def check(r, e):\n    return {expression}\n")
        assert any(needle in f for f in found), (expression, found)
    assert reasons("def check(r, e):\n    return getattr(r, 'real', 0)\n") == []
    assert reasons("class A:\n    def __init__(self):\n        super().__init__()\ndef check(r, e):\n    return 1.0\n") == []


def test_module_level_may_only_set_up():
    allowed = "import json\nX = json.loads('1')\nif X:\n    Y = 2\nelse:\n    Y = 3\ndef check(r, e):\n    return 1.0\n"
    assert reasons(allowed) == []
    for statement in ("while True:\n    pass", "for i in range(3):\n    pass", "with open('x') as f:\n    pass",
                      "raise SystemExit", "del X", "try:\n    print(1)\nexcept Exception:\n    pass"):
        found = reasons(f"X = 1\n{statement}\ndef check(r, e):\n    return 1.0\n")
        assert any("runs at import time" in f for f in found), (statement, found)


def test_unparsable_and_oversized_code():
    assert reasons("def check(r, e)\n    return 1\n") == ["line 1: syntax error: expected ':'"]
    assert reasons("def check(r, e):\n    return '\x00'\n") == ["syntax error: source code string cannot contain null bytes"]
    assert "limit is 200000" in reasons("#" * 200_001)[0]
    assert reasons(None) == ["judge code must be a string, got NoneType"]  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_gets_a_report_never_an_exception(code):
    report = validate_judge_code(code, [METRIC, GETTER])
    assert report.ok is (not report.reasons)
    assert not report.ok  # no random text defines both functions correctly


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["os.system('x')", "eval('1')", "open('f', 'w')", "os.kill(1, 9)",
                                 "().__class__", "getattr(e, e)"]), min_size=1, max_size=6))
def test_each_violation_is_reported_once_per_occurrence_line(calls):
    body = "".join(f"    {c}\n" for c in calls)
    found = reasons(f"import os\ndef check(r, e):\n{body}    return 1.0\n")
    lines = {int(f.split(":")[0].split()[1]) for f in found}
    assert lines == set(range(3, 3 + len(calls)))
