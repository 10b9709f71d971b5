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
    "environments.actions": "the tiny model's pretraining corpus writes its responses in the agent's tool-call "
                            "format (format_response: one definition of what parse_response reads back)",
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


# -- core's own layers (issue 39): the contract at the top level, core.runtime, core.commands -------------------

CORE = ROOT / "core"
#: ``python -m core.<name>``: the documented command names, each a module that only calls its command's main
COMMAND_NAMES = sorted(p.stem for p in CORE.glob("*.py")
                       if p.stem != "__init__" and (CORE / "commands" / p.name).is_file())
RANK = {"contract": 0, "runtime": 1, "commands": 2, "command name": 3}


def core_layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "core":
        return None
    if len(parts) > 1 and parts[1] in ("runtime", "commands"):
        return parts[1]
    if len(parts) > 1 and parts[1] in COMMAND_NAMES:
        return "command name"
    return "contract"


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def absolute_imports(path: Path) -> list[str]:
    """Every project module ``path`` imports, lazy and TYPE_CHECKING imports included: ``from a import b``
    imports the module ``a.b`` when there is one, else (a name defined in) ``a``."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{alias.name}" for alias in node.names]
            names += [sub if is_module(sub) else node.module for sub in subs]
    return names


def test_the_command_names_are_the_documented_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documented = {name for name in COMMAND_NAMES if f"python -m core.{name}" in readme}
    assert documented == set(COMMAND_NAMES) and len(COMMAND_NAMES) >= 12, (COMMAND_NAMES, documented)


def test_core_imports_only_downward() -> None:
    """The contract imports no runtime and no command; the runtime no command; a command name only its main."""
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        source = core_layer(module_of(path) if path.name != "__init__.py" else module_of(path) + ".__init__")
        for name in absolute_imports(path):
            target = core_layer(name)
            if target and RANK[target] > RANK[source or "contract"]:
                offenders.append(f"{path.relative_to(ROOT)} ({source}) imports {name} ({target})")
    assert not offenders, "\n".join(offenders)
    for name in COMMAND_NAMES:
        imported = {n for n in absolute_imports(CORE / f"{name}.py") if n.startswith("core.")}
        assert imported <= {f"core.commands.{name}", f"core.commands.{name}.main", "core.commands.cli",
                            "core.commands.cli.main_guard"}, f"core/{name}.py is more than a command's name: {imported}"


def test_the_contract_is_what_a_plugin_author_reads_and_stays_small() -> None:
    contract = [p for p in CORE.rglob("*.py") if core_layer(module_of(p)) == "contract"]
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in contract)
    assert lines <= 2800, f"the contract layer has grown to {lines} lines (issue 39: about 2,500)"


def test_no_import_cycle_between_files() -> None:
    """Between any two project files, lazy and TYPE_CHECKING imports included (a cycle there still means the
    split between the two files is in the wrong place)."""
    files = {module_of(p): p for top in (*TOPS, "bench", "configs") for p in (ROOT / top).rglob("*.py")}
    graph = {mod: {name for name in absolute_imports(path) if name in files and name != mod}
             for mod, path in files.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, f"import cycles between files: {cycles}"
