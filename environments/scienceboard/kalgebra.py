"""KAlgebra's live state from stock Debian KAlgebra: its AT-SPI tree and ``calgebra``.

ScienceBoard reads variables and plots from a KAlgebra build it instrumented
with a REST server. Stock KAlgebra shows the same state in widgets that AT-SPI
exposes: the *Variables* panel (a two-column table, name and value, values in
full precision) and the 2D *Functions* list (name and expression). Numbers
and points on curves are computed by ``calgebra``, the console front end of
the same Analitza engine, inside the desktop.

Qt exports its widgets only when the desktop has an accessibility bus and
KAlgebra runs with ``QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Sequence

APP_NAME = "kalgebra"
#: |f(x0) - y0| <= tolerance * max(1, |y0|): calgebra prints 12 significant digits
POINT_TOLERANCE = 1e-6
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def kalgebra_apps(tree_xml: str) -> list[ET.Element]:
    root = ET.fromstring(tree_xml)
    return [e for e in root.iter() if _local(e.tag) == "application" and e.get("name", "").lower() == APP_NAME]


def _table_pairs(frame: ET.Element) -> list[tuple[str, str]]:
    """(first column, second column) rows of the frame's first table (AT-SPI lists cells row by row)."""
    for element in frame.iter():
        if _local(element.tag) == "tree":
            cells = [c.get("name", "") for c in element if _local(c.tag) == "table-cell"]
            return list(zip(cells[0::2], cells[1::2]))
    return []


def _frames(app: ET.Element, title: str) -> list[ET.Element]:
    return [e for e in app.iter() if _local(e.tag) == "frame" and e.get("name", "").lstrip("&") == title]


def variables_from_tree(tree_xml: str) -> dict[str, str] | None:
    """``{name: value}`` of KAlgebra's Variables panel; None when KAlgebra is not running."""
    apps = kalgebra_apps(tree_xml)
    if not apps:
        return None
    variables: dict[str, str] = {}
    for frame in _frames(apps[0], "Variables"):
        for name, value in _table_pairs(frame):
            variables.setdefault(name, value)
    return variables


def functions_from_tree(tree_xml: str) -> list[dict[str, str]] | None:
    """``[{name, expression}]`` of the 2D Functions list; None when KAlgebra is not running."""
    apps = kalgebra_apps(tree_xml)
    if not apps:
        return None
    functions: list[dict[str, str]] = []
    for frame in _frames(apps[0], "Functions"):
        functions.extend({"name": n, "expression": e} for n, e in _table_pairs(frame) if e)
    return functions


# -- calgebra ------------------------------------------------------------------------


def calgebra_script(expressions: Sequence[str]) -> str:
    return "".join(f"{e}\n" for e in expressions)


def parse_calgebra(results: str, count: int) -> list[str | None]:
    """Results of ``count`` lines fed to ``calgebra``, from its standard error, where it writes them in order: one
    line per value, or ``Error:`` followed by `` - reason`` lines (None). Its standard output only echoes prompts."""
    values: list[str | None] = []
    for line in results.splitlines():
        if line.startswith(" - ") and values and values[-1] is None:
            continue  # the reasons of the error just recorded
        if not line.strip() or line.strip() == "Exit.":
            continue
        values.append(None if line.strip() == "Error:" else line.strip())
    values = values[:count]
    return values + [None] * (count - len(values))


def as_number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def point_probe(expression: str, point: Sequence[float]) -> tuple[str, float] | None:
    """The calgebra expression whose value decides whether ``point`` lies on the plotted ``expression``, and the
    value it must have; None for plots this does not evaluate (parametric, polar, 3D)."""
    x0, y0 = (repr(float(v)) for v in point)
    expr = expression.strip()
    if "=" in expr and "->" not in expr:  # implicit curve lhs = rhs
        lhs, rhs = expr.split("=", 1)
        return f"((x, y)->({lhs})-({rhs}))({x0}, {y0})", 0.0
    if "->" in expr:
        var, body = expr.split("->", 1)
        var = var.strip().strip("()")
        if var == "x":
            return f"(x->{body})({x0})", float(point[1])
        if var == "y":
            return f"(y->{body})({y0})", float(point[0])
        return None
    names = set(_IDENT.findall(expr))
    if "y" in names and "x" not in names:
        return f"(y->{expr})({y0})", float(point[0])
    if "y" in names:
        return None
    return f"(x->{expr})({x0})", float(point[1])


def on_curve(value: str | None, target: float) -> bool:
    number = as_number(value)
    return number is not None and abs(number - target) <= POINT_TOLERANCE * max(1.0, abs(target))


def point_key(point: Sequence[Any]) -> str:
    """ScienceBoard's key for a point: Python's ``str`` of the tuple, e.g. ``"(11, 5.74990173931)"``."""
    return str(tuple(point))
