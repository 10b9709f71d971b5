"""The core stays thin: no module in ``core/`` imports a concrete plugin package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import core

PLUGIN_PACKAGES = {"plugins", "environments", "samplers", "segmenters", "trainers"}
CORE_DIR = Path(core.__file__).parent


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                roots.add(arg.value.split(".")[0])
    return roots


def test_no_core_module_imports_a_plugin_package():
    offenders = {
        str(path.relative_to(CORE_DIR.parent)): sorted(imported_roots(path) & PLUGIN_PACKAGES)
        for path in sorted(CORE_DIR.rglob("*.py"))
    }
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"core modules import plugin packages: {offenders}"


def test_importing_every_core_module_loads_no_plugin():
    code = (
        "import pkgutil, sys, importlib, core\n"
        "for m in pkgutil.walk_packages(core.__path__, 'core.'):\n"
        "    importlib.import_module(m.name)\n"
        f"bad = sorted(n for n in sys.modules if n.split('.')[0] in {sorted(PLUGIN_PACKAGES)!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"importing core loaded plugin modules: {out}"


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_core_module_is_a_server():
    """The inference server and its wire protocol live in plugins/serving (issue 19), not in the core."""
    servers = {str(p.relative_to(CORE_DIR.parent)) for p in CORE_DIR.rglob("*.py")
               if {"http.server", "socketserver"} & imported_modules(p)}
    assert not servers, f"core modules that run servers: {sorted(servers)}; they belong in plugins/serving"


def test_trainers_and_the_server_reach_plugins_only_through_core_contracts():
    """Trainers use a model only through core's PolicyModel (model_inputs, token_logprobs, model_directory, ...)
    and import no plugin package; the server depends on core only, the rollout engines on it."""
    root = CORE_DIR.parent
    offenders = {}
    for package, banned in (("trainers", "plugins"), ("plugins/serving", "plugins.rollout")):
        for path in sorted((root / package).rglob("*.py")):
            bad = sorted(m for m in imported_modules(path) if m == banned or m.startswith(banned + "."))
            if bad:
                offenders[str(path.relative_to(root))] = bad
    assert not offenders, f"imports past the contracts: {offenders}"
