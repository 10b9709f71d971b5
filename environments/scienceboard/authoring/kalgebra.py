"""KAlgebra tasks: the calculator's variables (``val``/``var``), 2D plots (``eqn``), answers and one infeasible task.

KAlgebra starts with its accessibility bridge on, so the judges can read its
Variables panel and Functions list; the oracles type into the console input
(focused at start) or into the 2D Graph tab's "Add" page (Alt+A).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from environments.scienceboard.authoring.common import answer, done, enter, fail, key, stop, task, type_, wait

APP = "KAlgebra"
LAUNCH = {"func": "launch", "command": "QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1 QTWEBENGINE_DISABLE_SANDBOX=1 kalgebra",
          "shell": True, "window": "KAlgebra", "wait": 1}
GRAPH_2D = {"func": "tab", "index": 1}


def console(*lines: str) -> list[dict[str, Any]]:
    """Type each expression into the calculator's input line and run it."""
    out: list[dict[str, Any]] = []
    for line in lines:
        out += [type_(line), enter(), wait(1)]
    return out


def plot(*expressions: str) -> list[dict[str, Any]]:
    """Add each expression as a 2D function (the 2D Graph tab is open)."""
    out: list[dict[str, Any]] = []
    for expression in expressions:
        out += [key("alt", "a"), wait(0.5), type_(expression), enter(), wait(1)]
    return out


def points_item(points: list[tuple[float, float]], on: Callable[[float, float], bool]) -> dict[str, Any]:
    """An ``eqn`` item: which of ``points`` the wanted curve passes through (computed here, exactly)."""
    return {"type": "eqn", "key": [list(p) for p in points], "value": {str(p): on(*p) for p in points}}


def explicit(f: Callable[[float], float]) -> Callable[[float, float], bool]:
    return lambda x, y: abs(f(x) - y) <= 1e-9 * max(1.0, abs(y))


def tasks() -> list[dict[str, Any]]:
    parabola = [(0.0, -4.0), (2.0, 0.0), (3.0, 5.0), (-1.5, -1.75), (0.0, 0.0), (1.0, 1.0), (-2.0, 4.0)]
    sine = [(0.0, 0.0), (0.5, math.sin(0.5)), (2.0, math.sin(2.0)), (-1.0, math.sin(-1.0)), (1.0, 1.0),
            (math.pi / 2, 0.0), (3.0, -1.0)]
    circle = [(3.0, 0.0), (0.0, -3.0), (1.8, 2.4), (-2.4, -1.8), (0.0, 0.0), (2.0, 2.0), (3.0, 3.0)]
    rising = [(0.0, 1.0), (1.0, 3.0), (-2.0, -3.0), (0.0, 0.0), (1.0, 1.0)]
    falling = [(0.0, 4.0), (1.0, 3.0), (4.0, 0.0), (0.0, 1.0), (2.0, 5.0)]
    return [
        task("kalgebra-power-variable", APP, "In KAlgebra's calculator, store 2 to the power of 10 in a variable "
             "named k.", [LAUNCH], [{"type": "val", "key": "k", "value": 1024}],
             console("k := 2^10") + [done()], steps=5, ans="k := 2^10"),
        task("kalgebra-sum-of-squares", APP, "Use KAlgebra to compute the sum of the squares of the integers from 1 "
             "to 10 and store the result in a variable named s.", [LAUNCH],
             [{"type": "val", "key": "s", "value": 385}], console("s := sum(t^2 : t=1..10)") + [done()],
             steps=5, ans="s := sum(t^2 : t=1..10)"),
        task("kalgebra-define-function", APP, "Define the function f(x) = x^2 + 1 in KAlgebra's calculator, as a "
             "function named f.", [LAUNCH], [{"type": "var", "key": "f", "value": "x->x^2+1"}],
             console("f := x->x^2+1") + [done()], steps=5, ans="f := x->x^2+1"),
        task("kalgebra-square-root", APP, "Store the square root of 2 in a variable named r using KAlgebra.", [LAUNCH],
             [{"type": "val", "key": "r", "value": math.sqrt(2)}], console("r := root(2, 2)") + [done()], steps=5,
             ans="r := root(2, 2)"),
        task("kalgebra-fibonacci", APP, "Define the Fibonacci function fib in KAlgebra (fib(0) = 0, fib(1) = 1) and "
             "store fib(15) in a variable named v.", [LAUNCH], [{"type": "val", "key": "v", "value": 610}],
             console("fib := n->piecewise { n<2 ? n, ? fib(n-1)+fib(n-2) }", "v := fib(15)") + [done()], steps=8,
             ans="fib := n->piecewise { n<2 ? n, ? fib(n-1)+fib(n-2) }; v := fib(15)"),
        task("kalgebra-plot-parabola", APP, "Plot y = x^2 - 4 in KAlgebra's 2D Graph.", [LAUNCH, GRAPH_2D],
             [points_item(parabola, explicit(lambda x: x * x - 4))], plot("x^2-4") + [done()], steps=5, ans="x^2-4"),
        task("kalgebra-plot-sine", APP, "Plot the sine function y = sin(x) in KAlgebra's 2D Graph.",
             [LAUNCH, GRAPH_2D], [points_item(sine, explicit(math.sin))], plot("sin(x)") + [done()], steps=5,
             ans="sin(x)"),
        task("kalgebra-plot-circle", APP, "Plot the circle x^2 + y^2 = 9 in KAlgebra's 2D Graph.",
             [LAUNCH, GRAPH_2D], [points_item(circle, lambda x, y: abs(x * x + y * y - 9) <= 1e-9)],
             plot("x^2+y^2=9") + [done()], steps=5, ans="x^2+y^2=9"),
        task("kalgebra-plot-two-lines", APP, "Plot both lines y = 2x + 1 and y = 4 - x in KAlgebra's 2D Graph, "
             "and nothing else.", [LAUNCH, GRAPH_2D],
             [{"type": "eqn", "key": "#SIZE", "value": 2}, points_item(rising, explicit(lambda x: 2 * x + 1)),
              points_item(falling, explicit(lambda x: 4 - x))], plot("2*x+1", "4-x") + [done()], steps=8,
             ans="2*x+1; 4-x"),
        task("kalgebra-factorial-answer", APP, "Use KAlgebra to compute 12! (12 factorial) and submit the result as "
             "your answer.", [LAUNCH], [stop("ANS", "479001600")],
             console("factorial(12)") + [answer("479001600")], steps=5, ans="ANS 479001600"),
        task("kalgebra-gcd-answer", APP, "Use KAlgebra to find the greatest common divisor of 1071 and 462, and "
             "submit it as your answer.", [LAUNCH], [stop("ANS", "21")],
             console("gcd(1071, 462)") + [answer("21")], steps=5, ans="ANS 21"),
        task("kalgebra-4d-graph-infeasible", APP, "Plot y = x^2 on the 4D Graph tab of KAlgebra.", [LAUNCH],
             [stop("FAIL")], [fail()], steps=5, ans="FAIL"),
    ]
