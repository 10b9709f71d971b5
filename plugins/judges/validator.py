"""The rule validator: static checks on generated judge code before anything runs.

The judge executors call it before every execution, and VeriGen's checker
calls it on every proposed judge. It parses the code with :mod:`ast` and
returns *every* problem it finds, each with its line, so a fixer agent can
repair them all in one round.

Rules (each violation is one reason):

* The code parses, and is at most :data:`MAX_CODE_CHARS` characters.
* Each declared entry function exists as a top-level ``def`` (not ``async``,
  not a generator) whose signature accepts the call the executor makes:
  a metric is called as ``name(result, expected, **options)``, a getter as
  ``name(config)``.
* Module level holds only imports, definitions, assignments, docstrings and
  ``if``/``try`` blocks of those: nothing runs at import time but setup.
* Imports come from an allowlist (configurable; :data:`DEFAULT_ALLOWED_IMPORTS`):
  a module is allowed when it or a parent package is listed. No relative or
  star imports.
* No dynamic code or introspection escapes: ``exec``, ``eval``, ``compile``,
  ``__import__``, ``globals``, ``locals``, ``vars``, ``breakpoint``,
  ``input``, ``setattr``/``delattr``, ``getattr`` with a computed or dunder
  name, and no dunder attributes or names (``__class__``, ``__subclasses__``,
  ``__builtins__``...) beyond ``__name__``, ``__doc__``, ``__init__``,
  ``__version__``.
* ``os`` and ``io`` may only be used through listed read-only attributes
  (``os.path``, ``os.listdir``, ``os.walk``, ``os.stat``... ; ``io.StringIO``,
  ``io.BytesIO``): no ``os.system``, ``os.remove``, ``os.kill``, ``os.fork``...
* Files are opened for reading only: ``open()`` (and ``.open()``) with a
  literal mode without ``w``/``a``/``x``/``+``; no ``Path.write_text``,
  ``write_bytes``, ``unlink``, ``rmdir``, ``touch``, ``chmod``, ``symlink_to``.

Decision on ``open``: reading is allowed because getters read the
environment's files and metrics read artifact files; writing is refused
because a judge has nothing to write (its result is its return value). The
sandbox still contains code that slips past these rules; the validator is
the first line of defence and the source of actionable feedback, not the
security boundary.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable, Literal, Sequence

MAX_CODE_CHARS = 200_000

DEFAULT_ALLOWED_IMPORTS: tuple[str, ...] = (
    # standard library, side-effect free (reading files is allowed, see the module docstring)
    "ast", "base64", "binascii", "bisect", "calendar", "cmath", "collections", "configparser", "copy", "csv",
    "dataclasses", "datetime", "decimal", "difflib", "enum", "fnmatch", "fractions", "functools", "glob", "gzip",
    "hashlib", "heapq", "html", "io", "itertools", "json", "math", "mimetypes", "numbers", "operator", "os",
    "pathlib", "plistlib", "pprint", "re", "shlex", "sqlite3", "statistics", "string", "struct", "textwrap",
    "time", "typing", "unicodedata", "urllib.parse", "xml.dom.minidom", "xml.etree", "zipfile", "zlib",
    # document, table and image libraries OSWorld-style judges use
    "bs4", "cssselect", "dateutil", "docx", "fitz", "imagehash", "Levenshtein", "lxml", "numpy", "odf",
    "openpyxl", "pandas", "pdfplumber", "PIL", "pptx", "pypdf", "PyPDF2", "pytz", "rapidfuzz", "skimage",
    "xmltodict", "yaml",
)

#: why well-known dangerous modules are refused (all of them are outside the default allowlist)
MODULE_REASONS = {
    "subprocess": "runs external programs", "socket": "opens network connections", "ctypes": "calls native code",
    "cffi": "calls native code", "multiprocessing": "starts processes", "threading": "starts threads",
    "_thread": "starts threads", "signal": "changes signal handling", "sys": "reaches the interpreter's internals",
    "builtins": "reaches the interpreter's internals", "importlib": "imports modules dynamically",
    "pickle": "executes code while loading", "marshal": "loads code objects", "shelve": "executes code while loading",
    "shutil": "copies and deletes files", "tempfile": "creates files", "pty": "starts processes",
    "resource": "changes process limits", "inspect": "reaches frames and code objects", "gc": "reaches every object",
    "code": "runs code", "codeop": "compiles code", "runpy": "runs code", "asyncio": "starts processes and sockets",
    "http": "talks to the network", "urllib.request": "talks to the network", "requests": "talks to the network",
    "httpx": "talks to the network", "ssl": "talks to the network", "random": "makes rewards non-deterministic",
}

DENIED_CALLS = {
    "exec": "runs dynamically built code", "eval": "runs dynamically built code",
    "compile": "builds code objects", "__import__": "imports modules dynamically",
    "globals": "exposes the module namespace", "locals": "exposes frames", "vars": "exposes namespaces",
    "breakpoint": "starts a debugger", "input": "waits for input that never comes",
    "setattr": "mutates objects by name", "delattr": "mutates objects by name",
    "exit": "ends the process", "quit": "ends the process", "help": "starts an interactive pager",
}

ALLOWED_DUNDERS = frozenset({"__name__", "__doc__", "__init__", "__version__"})

#: modules usable only through these attributes (read-only file-system queries, in-memory buffers)
RESTRICTED_MODULES: dict[str, frozenset[str]] = {
    "os": frozenset({
        "path", "sep", "altsep", "extsep", "pathsep", "linesep", "curdir", "pardir", "devnull", "name",
        "listdir", "scandir", "walk", "stat", "lstat", "access", "getcwd", "fspath", "fsdecode", "fsencode",
        "environ", "getenv", "strerror", "PathLike", "R_OK", "F_OK", "X_OK", "W_OK", "SEEK_SET", "SEEK_CUR",
        "SEEK_END", "cpu_count", "stat_result", "DirEntry",
    }),
    "io": frozenset({"StringIO", "BytesIO", "TextIOWrapper", "BufferedReader", "SEEK_SET", "SEEK_CUR", "SEEK_END"}),
}

#: method names that write or delete files whatever object they are called on
WRITING_METHODS = frozenset({"write_text", "write_bytes", "unlink", "rmdir", "touch", "chmod", "lchmod",
                             "symlink_to", "hardlink_to", "link_to", "rmtree"})

EntryKind = Literal["metric", "getter"]


def _restricted_hint(module: str) -> str:
    return f"{module} is limited to: {', '.join(sorted(RESTRICTED_MODULES[module], key=str.lower))}"


@dataclass(frozen=True)
class EntryPoint:
    """A function the executor will call: a metric ``f(result, expected, **options)`` or a getter ``f(config)``."""

    name: str
    kind: EntryKind
    option_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Violation:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass(frozen=True)
class ValidationReport:
    violations: tuple[Violation, ...] = field(default_factory=tuple)
    #: extra guidance shown once (e.g. the import allowlist when an import was refused)
    hint: str | None = None

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def reasons(self) -> list[str]:
        return [str(v) for v in self.violations]

    def summary(self) -> str:
        noun = "problem" if len(self.violations) == 1 else "problems"
        text = f"rejected by the rule validator ({len(self.violations)} {noun}): " + "; ".join(self.reasons)
        return f"{text}. {self.hint}" if self.hint else text


def module_allowed(module: str, allowed: Iterable[str]) -> bool:
    """``module`` or one of its parent packages is in ``allowed``."""
    parts = module.split(".")
    prefixes = {".".join(parts[: i + 1]) for i in range(len(parts))}
    return bool(prefixes & set(allowed))


def _mode_is_read_only(mode: ast.expr | None) -> bool | None:
    """True/False for a literal mode, None when the mode is computed."""
    if mode is None:
        return True
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return not set(mode.value) & set("wax+")
    return None


class _Checker(ast.NodeVisitor):
    def __init__(self, allowed_imports: Sequence[str]):
        self.allowed = tuple(allowed_imports)
        self.violations: list[Violation] = []
        self.module_aliases: dict[str, str] = {}  # local name -> module it is bound to
        self._qualified_names: set[int] = set()  # Name nodes used as `module.attribute`
        self.imports_done = False  # second pass: imports were checked already

    def add(self, node: ast.AST | None, message: str) -> None:
        self.violations.append(Violation(getattr(node, "lineno", 0), message))

    # -- imports ------------------------------------------------------------
    def _check_module(self, node: ast.AST, module: str) -> bool:
        if module_allowed(module, self.allowed):
            return True
        why = next((MODULE_REASONS[m] for m in (module, module.split(".")[0]) if m in MODULE_REASONS), None)
        because = f" ({why})" if why else ""
        self.add(node, f"import of '{module}' is not allowed{because}; use a module from the import allowlist")
        return False

    def visit_Import(self, node: ast.Import) -> None:
        if self.imports_done:
            return
        for alias in node.names:
            self._check_module(node, alias.name)
            if alias.asname:
                self.module_aliases[alias.asname] = alias.name
            else:
                self.module_aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if self.imports_done:
            return
        if node.level:
            self.add(node, "relative imports are not allowed; judge code is a single module")
            return
        module = node.module or ""
        if not self._check_module(node, module):
            return
        for alias in node.names:
            if alias.name == "*":
                self.add(node, f"'from {module} import *' is not allowed; import the names you use")
                continue
            allowed_attrs = RESTRICTED_MODULES.get(module)
            if allowed_attrs is not None and alias.name not in allowed_attrs:
                self.add(node, f"'{module}.{alias.name}' is not allowed; {_restricted_hint(module)}")
            if f"{module}.{alias.name}" in MODULE_REASONS:
                self._check_module(node, f"{module}.{alias.name}")
            self.module_aliases[alias.asname or alias.name] = f"{module}.{alias.name}"

    # -- names and attributes -------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("__") and node.id.endswith("__") and node.id not in ALLOWED_DUNDERS:
            self.add(node, f"the name '{node.id}' is not allowed (interpreter internals)")
        module = self.module_aliases.get(node.id)
        if module in RESTRICTED_MODULES and id(node) not in self._qualified_names and isinstance(node.ctx, ast.Load):
            self.add(node, f"module '{module}' may only be used as {module}.<attribute>; {_restricted_hint(module)}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS:
            self.add(node, f"the attribute '{node.attr}' is not allowed (interpreter internals)")
        if isinstance(node.value, ast.Name) and node.value.id in self.module_aliases:
            module = self.module_aliases[node.value.id]
            self._qualified_names.add(id(node.value))
            allowed_attrs = RESTRICTED_MODULES.get(module)
            if allowed_attrs is not None and node.attr not in allowed_attrs:
                self.add(node, f"'{module}.{node.attr}' is not allowed; {_restricted_hint(module)}")
        self.generic_visit(node)

    # -- calls ------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            if func.id in DENIED_CALLS and func.id not in self.module_aliases:
                self.add(node, f"calling {func.id}() is not allowed ({DENIED_CALLS[func.id]})")
            elif func.id == "getattr":
                self._check_getattr(node)
            elif func.id == "open":
                self._check_builtin_open(node)
        elif isinstance(func, ast.Attribute):
            module = self.module_aliases.get(func.value.id) if isinstance(func.value, ast.Name) else None
            if module is not None:  # module.function(...): the attribute itself is checked in visit_Attribute
                allowed_attrs = RESTRICTED_MODULES.get(module)
                if func.attr == "open" and (allowed_attrs is None or "open" in allowed_attrs):
                    self._check_method_open(node, mode_index=1)  # gzip.open(path, mode)
            elif func.attr in WRITING_METHODS:
                self.add(node, f".{func.attr}() is not allowed: judges read files, they never write or delete them")
            elif func.attr == "open":  # Path(p).open(mode) or archive.open(name, mode)
                self._check_method_open(node, mode_index=1 if len(node.args) >= 2 else 0)
        self.generic_visit(node)

    def _check_getattr(self, node: ast.Call) -> None:
        if len(node.args) < 2:
            return
        name = node.args[1]
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            self.add(node, "getattr() with a computed attribute name is not allowed; use obj.attribute")
        elif name.value.startswith("__") and name.value not in ALLOWED_DUNDERS:
            self.add(node, f"getattr(..., '{name.value}') is not allowed (interpreter internals)")

    def _check_builtin_open(self, node: ast.Call) -> None:
        mode = next((k.value for k in node.keywords if k.arg == "mode"), None)
        if mode is None and len(node.args) > 1:
            mode = node.args[1]
        verdict = _mode_is_read_only(mode)
        if verdict is None:
            self.add(node, "open() needs a literal read mode ('r' or 'rb') so the validator can check it")
        elif verdict is False:
            self.add(node, f"open() for writing is not allowed (mode {ast.literal_eval(mode)!r}); judges only read")

    def _check_method_open(self, node: ast.Call, *, mode_index: int) -> None:
        """A literal write mode in ``x.open(...)``; a computed mode cannot be checked here and is let through."""
        mode = next((k.value for k in node.keywords if k.arg == "mode"), None)
        if mode is None and len(node.args) > mode_index:
            mode = node.args[mode_index]
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and _mode_is_read_only(mode) is False:
            self.add(node, f".open() for writing is not allowed (mode {mode.value!r}); judges only read")


def _is_main_guard(test: ast.expr) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__")


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def _check_module_level(body: Sequence[ast.stmt], report: list[Violation]) -> None:
    definitions = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign,
                   ast.AugAssign, ast.Pass)
    for stmt in body:
        if isinstance(stmt, definitions) or _is_docstring(stmt):
            continue
        if isinstance(stmt, ast.If):
            # `if __name__ == "__main__":` never runs (judges are loaded under another name)
            _check_module_level(stmt.orelse if _is_main_guard(stmt.test) else stmt.body + stmt.orelse, report)
        elif isinstance(stmt, ast.Try):
            blocks = stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body]
            _check_module_level(blocks, report)
        else:
            kind = type(stmt).__name__.lower()
            report.append(Violation(stmt.lineno, f"a top-level '{kind}' statement runs at import time; module level "
                                                  f"may only hold imports, definitions and assignments"))


def _check_entry(tree: ast.Module, entry: EntryPoint, report: list[Violation]) -> None:
    call = "name(result, expected, **options)" if entry.kind == "metric" else "name(config)"
    defs = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == entry.name]
    if not defs:
        elsewhere = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry.name
                        for n in ast.walk(tree))
        where = " (it is nested; move it to module level)" if elsewhere else ""
        report.append(Violation(0, f"the {entry.kind} function '{entry.name}' is not defined at module level{where}; "
                                   f"it is called as {call.replace('name', entry.name)}"))
        return
    if len(defs) > 1:
        report.append(Violation(defs[-1].lineno, f"'{entry.name}' is defined {len(defs)} times; keep one definition"))
    fn = defs[-1]
    if isinstance(fn, ast.AsyncFunctionDef):
        report.append(Violation(fn.lineno, f"'{entry.name}' must be a plain 'def', not 'async def'"))
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn)):
        report.append(Violation(fn.lineno, f"'{entry.name}' must return its value, not yield"))
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    passed = 2 if entry.kind == "metric" else 1
    required = len(positional) - len(args.defaults)
    if len(positional) < passed and args.vararg is None:
        report.append(Violation(fn.lineno, f"'{entry.name}' takes {len(positional)} positional parameter(s) but is "
                                           f"called as {call.replace('name', entry.name)}"))
    if required > passed:
        report.append(Violation(fn.lineno, f"'{entry.name}' requires {required} positional parameters; only "
                                           f"{passed} are passed ({call.replace('name', entry.name)})"))
    keyword_names = {a.arg for a in args.args[max(0, passed - len(args.posonlyargs)):]} | {a.arg for a in args.kwonlyargs}
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if default is None and arg.arg not in entry.option_names:
            report.append(Violation(fn.lineno, f"'{entry.name}': keyword-only parameter '{arg.arg}' has no default "
                                               f"and is not among the options"))
    first = {a.arg for a in positional[:passed]}
    for option in entry.option_names:
        if option in first:
            report.append(Violation(fn.lineno, f"'{entry.name}': option '{option}' collides with a positional parameter"))
        elif option not in keyword_names and args.kwarg is None:
            report.append(Violation(fn.lineno, f"'{entry.name}' does not accept the option '{option}'; add a parameter "
                                               f"or **options"))


def validate_judge_code(
    code: str, entries: Sequence[EntryPoint], *, allowed_imports: Iterable[str] = DEFAULT_ALLOWED_IMPORTS
) -> ValidationReport:
    """Every rule violation in ``code`` (see the module docstring); an empty report means it may run."""
    if not isinstance(code, str):
        return ValidationReport((Violation(0, f"judge code must be a string, got {type(code).__name__}"),))
    if len(code) > MAX_CODE_CHARS:
        return ValidationReport((Violation(0, f"judge code is {len(code)} characters; the limit is {MAX_CODE_CHARS}"),))
    try:
        tree = ast.parse(code, filename="<judge>")
    except SyntaxError as exc:
        return ValidationReport((Violation(exc.lineno or 0, f"syntax error: {exc.msg}"),))
    except ValueError as exc:  # e.g. null bytes
        return ValidationReport((Violation(0, f"cannot parse: {exc}"),))
    report: list[Violation] = []
    for entry in entries:
        _check_entry(tree, entry, report)
    _check_module_level(tree.body, report)
    checker = _Checker(tuple(allowed_imports))
    # Imports first, so module aliases are known wherever their names are used.
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            checker.visit(node)
    checker.imports_done = True
    checker.visit(tree)
    violations = sorted(report + checker.violations, key=lambda v: v.line)
    hint = None
    if any(v.message.startswith("import of") for v in violations):
        hint = f"allowed imports: {', '.join(sorted(checker.allowed, key=str.lower))}"
    return ValidationReport(tuple(dict.fromkeys(violations)), hint)
