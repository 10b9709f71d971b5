"""ScienceBoard's ``key``/``pred`` lambdas (``"lambda dump: dump['layers']"``), evaluated without ``eval``'s reach.

Upstream calls ``eval`` on these strings. Task files may come from synthesis
pipelines, so here a string must parse as one ``lambda`` built only from
expressions (comprehensions, comparisons, subscripts, arithmetic, calls of a
few builtins and of public methods); names must be its parameters,
comprehension variables, assignment expressions' targets or those builtins;
``__import__`` may load only :data:`IMPORTABLE` (ScienceBoard's lambdas use
``math.sqrt`` and ``datetime.today``); attributes starting with ``_`` are
refused. What passes is compiled and run with ``__builtins__`` holding only that import.
"""

from __future__ import annotations

import ast
import functools
from typing import Any, Callable

SAFE_BUILTINS: dict[str, Any] = {
    f.__name__: f
    for f in (any, all, len, float, int, str, bool, abs, round, min, max, sum, sorted, set, list, dict, tuple,
              enumerate, zip, range, reversed)
}
#: modules a lambda may ``__import__``: pure computation, no files, processes or network
IMPORTABLE = ("math", "datetime")


#: what those modules' C code imports for itself (``strftime`` imports ``time``), never the lambda's own code
_INTERNAL = ("time",)


def _import(name: str, *args: Any, **kwargs: Any) -> Any:
    """The ``__import__`` a lambda's code sees."""
    if name not in IMPORTABLE or args or kwargs:
        raise UnsafeLambda(f"a judge lambda may import only {', '.join(IMPORTABLE)} (one argument), not {name!r}")
    return __import__(name)


def _internal_import(name: str, *args: Any, **kwargs: Any) -> Any:
    """The ``__import__`` in the lambdas' ``__builtins__``, which C code of the importable modules calls."""
    if name not in IMPORTABLE + _INTERNAL:
        raise UnsafeLambda(f"a judge lambda may import only {', '.join(IMPORTABLE)}, not {name!r}")
    return __import__(name, *args, **kwargs)


SAFE_BUILTINS.update({"True": True, "False": False, "None": None, "__import__": _import})

_ALLOWED_NODES = (
    ast.Expression, ast.Lambda, ast.arguments, ast.arg, ast.Name, ast.Load, ast.Store, ast.Constant,
    ast.Attribute, ast.Call, ast.keyword, ast.Subscript, ast.Slice, ast.Compare, ast.BoolOp, ast.UnaryOp,
    ast.BinOp, ast.IfExp, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.comprehension,
    ast.List, ast.Tuple, ast.Dict, ast.Set, ast.Starred, ast.JoinedStr, ast.FormattedValue,
    ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Invert, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt,
    ast.GtE, ast.In, ast.NotIn, ast.Is, ast.IsNot, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv,
    ast.Mod, ast.Pow, ast.NamedExpr,
)


class UnsafeLambda(ValueError):
    """The string is not a lambda this evaluator accepts; the message names the offending part."""


def is_lambda(source: str) -> bool:
    return source.strip().startswith("lambda")


def _bound_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)  # comprehension targets
    return names


@functools.lru_cache(maxsize=512)
def compile_lambda(source: str) -> Callable[..., Any]:
    """The function ``source`` defines; raises :class:`UnsafeLambda` when it is not a plain, safe lambda."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise UnsafeLambda(f"{source!r} is not valid Python: {exc.msg}") from None
    if not isinstance(tree.body, ast.Lambda):
        raise UnsafeLambda(f"{source!r} must be a single 'lambda ...' expression")
    bound = _bound_names(tree)
    calls = {id(node.func): node for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "__import__":
            call = calls.get(id(node))
            if call is None or call.keywords or len(call.args) != 1 or not isinstance(call.args[0], ast.Constant) \
                    or call.args[0].value not in IMPORTABLE:
                raise UnsafeLambda(f"{source!r}: __import__ may only be called with one of "
                                   f"{', '.join(map(repr, IMPORTABLE))}")
        if not isinstance(node, _ALLOWED_NODES):
            raise UnsafeLambda(f"{source!r}: {type(node).__name__} is not allowed in a judge lambda")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise UnsafeLambda(f"{source!r}: attribute {node.attr!r} is not allowed")
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound \
                and node.id not in SAFE_BUILTINS:
            raise UnsafeLambda(f"{source!r}: unknown name {node.id!r} (allowed: the lambda's parameters and "
                               f"{', '.join(sorted(SAFE_BUILTINS))})")
    code = compile(tree, "<scienceboard-lambda>", "eval")
    return eval(code, {"__builtins__": {"__import__": _internal_import}, **SAFE_BUILTINS})  # noqa: S307 (checked above)
