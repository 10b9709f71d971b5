"""The package graph is a DAG a newcomer can draw from the folder names (issue 19).

Units: ``core``, ``samplers``, ``segmenters``, ``trainers`` (subpackages folded in), the top-level modules of
``environments`` and of ``plugins``, and each of their subpackages (``environments.judges``,
``plugins.rollout``, ...). Every import counts, lazy ones inside functions included. A package's registration
module (``plugin.py``) is left out: it names the package's parts to register them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import core

ROOT = Path(core.__file__).parent.parent
TOPS = ("core", "environments", "samplers", "segmenters", "trainers", "plugins")
SPLIT = ("environments", "plugins")  # packages whose subpackages are units of their own
#: modules another top-level package may import besides core's contracts; each is the documented public face
#: of its package, and why the importer needs it
PUBLIC = {
    "environments.judges.evaluate": "the rule validator finds a generated judge's functions as the judge does",
    "environments.setup": "the rule validator checks a candidate task's setup step types against the runner's",
    "trainers.policy": "the hf rollout engine samples with the trainer's logits and support (one definition)",
}


def unit(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] not in TOPS:
        return None
    if parts[0] in SPLIT and len(parts) > 1 and (ROOT / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return parts[0]


def imports() -> list[tuple[str, str, str]]:
    """(importing file, its unit, imported module) for every absolute import of a project module."""
    out = []
    for top in TOPS:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            if rel.name == "plugin":
                continue
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            source = unit(".".join(parts) + (".__init__" if rel.name == "__init__" else ""))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
                else:
                    continue
                out.extend((str(rel) + ".py", source, name) for name in names if unit(name))
    return out


def test_the_unit_graph_has_no_cycle() -> None:
    graph: dict[str, set[str]] = {}
    for _, source, module in imports():
        target = unit(module)
        if source and target and target != source:
            graph.setdefault(source, set()).add(target)
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, f"import cycles between units: {cycles}"


def test_core_is_the_bottom_and_packages_meet_only_through_core_or_a_public_module() -> None:
    offenders = []
    for path, source, module in imports():
        source_top, target_top = source.split(".")[0], module.split(".")[0]
        if source_top == target_top or target_top == "core":
            continue
        if source_top == "core":
            offenders.append(f"{path} imports {module}: core imports no other package")
        elif not any(module == m or module.startswith(m + ".") for m in PUBLIC):
            offenders.append(f"{path} imports {module}: not core and not a public module (PUBLIC in this test)")
    assert not offenders, "\n".join(offenders)


def test_every_public_module_exists_and_is_used() -> None:
    used = {m for _, _, module in imports() for m in PUBLIC if module == m or module.startswith(m + ".")}
    for module in PUBLIC:
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), f"{module} is listed as public but missing"
    assert used == set(PUBLIC), f"public modules nobody imports any more: {sorted(set(PUBLIC) - used)}"
