"""vLLM's real API, read from its source without importing it (no GPU, no CUDA wheels needed).

The source is the installed ``vllm`` when there is one, else the wheel of the release the ``gpu`` extra pins,
downloaded once (``pip download --no-deps``, ~350 MB) into ``$SCALECUA_CACHE`` (default ``~/.cache/scalecua``).
Only Python files are read, with :mod:`ast`: classes, their fields (dataclass / msgspec / pydantic / TypedDict
annotations, ``__init__`` parameters and ``self.x = ...`` assignments), methods and their parameters, following
base classes and re-exports (including ``vllm/__init__.py``'s lazy ``MODULE_ATTRS``), and HTTP routes
(``@router.post("/path")``).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

REPO = Path(__file__).resolve().parents[2]


def pinned_version() -> str:
    """The vLLM release of the ``gpu`` extra (its lower bound, which the upper bound keeps to one minor)."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    spec = next(s for s in extras["gpu"] if s.startswith("vllm"))
    match = re.search(r"(?:==|>=)\s*([0-9][0-9.]*)", spec)
    assert match, f"the gpu extra's vllm requirement {spec!r} names no version"
    return match.group(1)


@dataclass
class Member:
    kind: str  # field | method
    params: tuple[str, ...] = ()  # methods: parameter names after self
    varkw: bool = False


class VLLMSource:
    def __init__(self, files: Mapping[str, str], origin: str):
        self.files = dict(files)  # "vllm/a/b.py" -> text
        self.origin = origin
        self._trees: dict[str, ast.Module] = {}

    @classmethod
    def from_wheel(cls, wheel: Path) -> VLLMSource:
        with zipfile.ZipFile(wheel) as archive:
            files = {n: archive.read(n).decode("utf-8", "replace") for n in archive.namelist()
                     if n.startswith("vllm/") and n.endswith(".py")}
        return cls(files, str(wheel))

    @classmethod
    def from_directory(cls, package_dir: Path) -> VLLMSource:
        root = package_dir.parent
        files = {str(p.relative_to(root)): p.read_text(errors="replace") for p in package_dir.rglob("*.py")}
        return cls(files, str(package_dir))

    @classmethod
    def locate(cls) -> VLLMSource:
        spec = importlib.util.find_spec("vllm")
        if spec is not None and spec.origin and "fake_vllm" not in spec.origin:
            return cls.from_directory(Path(spec.origin).parent)
        version = pinned_version()
        cache = Path(os.environ.get("SCALECUA_CACHE", Path.home() / ".cache" / "scalecua")) / "wheels"
        wheels = sorted(cache.glob(f"vllm-{version}-*.whl"))
        if not wheels:
            cache.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--disable-pip-version-check",
                            "-d", str(cache), f"vllm=={version}"], check=True, timeout=1800)
            wheels = sorted(cache.glob(f"vllm-{version}-*.whl"))
        assert wheels, f"pip download vllm=={version} left no wheel in {cache}"
        return cls.from_wheel(wheels[-1])

    # -- modules and names ------------------------------------------------------

    def path_of(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if candidate in self.files:
                return candidate
        return None

    def tree(self, module: str) -> ast.Module:
        path = self.path_of(module)
        if path is None:
            raise LookupError(f"module {module} does not exist")
        if path not in self._trees:
            self._trees[path] = ast.parse(self.files[path])
        return self._trees[path]

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.AST]:
        """Where ``module.name`` is defined: (module, its ClassDef / FunctionDef / assignment)."""
        if depth > 8:
            raise LookupError(f"{module}.{name}: re-exports go in circles")
        tree = self.tree(module)
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return module, node
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return module, node
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                return module, node
        for node in ast.walk(tree):  # re-exports, also inside `if TYPE_CHECKING:` / try blocks
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        return self.resolve(self._absolute(module, node), alias.name, depth + 1)
        lazy = self._lazy_attrs(tree).get(name)  # vllm/__init__.py: MODULE_ATTRS = {"X": ".mod:X"}
        if lazy:
            target, _, attr = lazy.partition(":")
            return self.resolve(self._absolute_name(module, target), attr or name, depth + 1)
        raise LookupError(f"{module} defines no {name}")

    def _absolute(self, module: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        return self._absolute_name(module, "." * node.level + (node.module or ""))

    def _absolute_name(self, module: str, relative: str) -> str:
        if not relative.startswith("."):
            return relative
        level = len(relative) - len(relative.lstrip("."))
        package = module if (self.path_of(module) or "").endswith("__init__.py") else module.rpartition(".")[0]
        for _ in range(level - 1):
            package = package.rpartition(".")[0]
        rest = relative.lstrip(".")
        return f"{package}.{rest}" if rest else package

    @staticmethod
    def _lazy_attrs(tree: ast.Module) -> dict[str, str]:
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
                values = [v.value for v in node.value.values if isinstance(v, ast.Constant)]
                if keys and len(keys) == len(values) and all(isinstance(v, str) and ":" in v for v in values):
                    return dict(zip(keys, values))
        return {}

    # -- classes -----------------------------------------------------------------

    def members(self, module: str, cls: str) -> dict[str, Member]:
        """Fields and methods of ``module.cls`` and its bases found in vLLM (nearest definition wins)."""
        where, node = self.resolve(module, cls)
        if not isinstance(node, ast.ClassDef):
            raise LookupError(f"{module}.{cls} is not a class")
        found: dict[str, Member] = {}
        for base in node.bases:
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
            if isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name):
                name = base.value.id
            if name is None:
                continue
            try:
                found.update(self.members(where, name))
            except LookupError:
                pass  # a base outside vLLM (ABC, msgspec.Struct, BaseModel, TypedDict, Generic)
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                found[item.target.id] = Member("field")
            elif isinstance(item, ast.Assign):
                for target in item.targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = Member("field")
            elif isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = item.args
                params = tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])[1:]
                is_property = any(isinstance(d, ast.Name) and d.id in ("property", "cached_property")
                                  for d in item.decorator_list)
                found[item.name] = Member("field" if is_property else "method", params, args.kwarg is not None)
                if item.name == "__init__":
                    for param in params:
                        found.setdefault(param, Member("field"))
                    for sub in ast.walk(item):
                        if (isinstance(sub, (ast.Assign, ast.AnnAssign))):
                            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                            for target in targets:
                                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                                        and target.value.id == "self"):
                                    found.setdefault(target.attr, Member("field"))
        return found

    # -- HTTP ------------------------------------------------------------------------

    def routes(self) -> dict[str, set[str]]:
        """``/path`` -> methods, from every ``@<router or app>.<method>("/path")`` decorator."""
        out: dict[str, set[str]] = {}
        pattern = re.compile(r"@\w+\.(get|post|put|delete|api_route)\(\s*\"(/[^\"]*)\"")
        for path, text in self.files.items():
            if path.startswith("vllm/entrypoints/"):
                for method, route in pattern.findall(text):
                    out.setdefault(route, set()).add(method.upper())
        return out


# -- what the project uses ---------------------------------------------------------------------------------


def project_imports(paths: list[Path]) -> Iterator[tuple[Path, str, str | None]]:
    """(file, vllm module, name or None) for every ``import vllm...`` / ``from vllm... import name``."""
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vllm":
                for alias in node.names:
                    yield path, node.module, alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "vllm":
                        yield path, alias.name, None


def keyword_calls(path: Path, callee: str) -> list[tuple[int, list[str]]]:
    """(line, keyword names) of every call to ``callee`` (a name or the last part of an attribute) in ``path``."""
    calls = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name == callee:
                calls.append((node.lineno, [k.arg for k in node.keywords if k.arg is not None]))
    return calls


def attribute_calls(path: Path, owner: str) -> dict[str, tuple[int, list[str], int]]:
    """``self.<owner>.<method>(...)`` calls: method -> (line, keyword names, positional count)."""
    out: dict[str, tuple[int, list[str], int]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
            if (isinstance(target, ast.Attribute) and target.attr == owner and isinstance(target.value, ast.Name)
                    and target.value.id == "self"):
                out.setdefault(node.func.attr, (node.lineno, [k.arg for k in node.keywords if k.arg],
                                                len(node.args)))
    return out


def attribute_reads(path: Path, owner: str) -> dict[str, int]:
    """``self.<owner>.<name>`` uses that are not calls: name -> line."""
    out: dict[str, int] = {}
    tree = ast.parse(path.read_text())
    called = {(n.func.lineno, n.func.col_offset) for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == owner
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"
                and (node.lineno, node.col_offset) not in called):
            out.setdefault(node.attr, node.lineno)
    return out


def route_literals(path: Path) -> dict[str, int]:
    """String constants in ``path`` that are HTTP paths (``"/update_weights"``, ``"/pause?mode=wait"``): the
    path without its query -> line."""
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = re.fullmatch(r"(/[a-z0-9_]+(?:/[a-z0-9_]+)*)(\?[a-z0-9=_&]*)?", node.value)
            if match:
                out.setdefault(match.group(1), node.lineno)
    return out
