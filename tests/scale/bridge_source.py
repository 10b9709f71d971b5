"""Megatron-Bridge's Qwen-VL weight mapping tables, read from its source without importing it (no CUDA, no 3.12).

The source is the installed ``megatron.bridge`` when there is one, else the wheel of the release the ``megatron``
extra names (the lowest release its ``>=`` bound admits), downloaded once (``pip download --no-deps
--python-version 3.12 --only-binary :all:``, ~2 MB) into ``$SCALECUA_CACHE/wheels`` (default
``~/.cache/scalecua/wheels``), as :mod:`tests.scale.vllm_api` does for vLLM.

Read with :mod:`ast`: the bridge class registered for a ``model_type`` (``@MegatronModelBridge.register_bridge(...,
model_type="qwen3_vl")``), the mappings its ``mapping_registry()`` builds (dict literals fed to a mapping class in a
``for megatron_param, hf_param in d.items()`` loop, and direct ``QKVMapping(megatron_param=..., q=..., k=..., v=...)``
-style calls, positional arguments bound through the mapping class's own ``__init__``), and the ``provider.<field> =
...`` settings of its ``provider_bridge()`` that decide which optional weights the Megatron model has.
:func:`export_names` expands the Hugging Face side of those tables for a config, as ``export_hf_weights`` names
the weights it yields.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import itertools
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PROJECT = "megatron-bridge"
#: the Python the wheel is for: the ``megatron`` extra's marker (the Bridge needs >= 3.12)
WHEEL_PYTHON = "3.12"

#: Megatron language-model weights that exist only when a provider field is on: (name fragment, field)
OPTIONAL_WEIGHTS = (
    (".self_attention.linear_qkv.bias", "add_qkv_bias"),
    (".self_attention.q_layernorm.", "qk_layernorm"),
    (".self_attention.k_layernorm.", "qk_layernorm"),
)
#: the Hugging Face path segment before a ``*`` -> how many there are, from the config
_COUNTS = {
    "layers": lambda c: c.text_config.num_hidden_layers,
    "blocks": lambda c: c.vision_config.depth,
    "deepstack_merger_list": lambda c: len(getattr(c.vision_config, "deepstack_visual_indexes", None) or ()),
}


def requirement() -> Requirement:
    """The ``megatron`` extra's Megatron-Bridge requirement."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    spec = next(s for s in extras["megatron"] if s.startswith(PROJECT))
    return Requirement(spec)


def pinned_version() -> str:
    """The lowest release the extra admits: its ``>=`` (or ``==``) bound ("0.6" is release 0.6.0, PEP 440)."""
    bounds = [s.version for s in requirement().specifier if s.operator in (">=", "==", "~=")]
    assert bounds, f"the megatron extra's requirement {requirement()} names no lower bound"
    return str(Version(bounds[0]))


def cache_dir() -> Path:
    return Path(os.environ.get("SCALECUA_CACHE", Path.home() / ".cache" / "scalecua")) / "wheels"


def _cached(version: str) -> list[Path]:
    stem = PROJECT.replace("-", "_")
    return sorted(p for p in cache_dir().glob(f"{stem}-*.whl") if Version(p.name.split("-")[1]) == Version(version))


def wheel(version: str | None = None) -> Path:
    """The release's wheel, downloaded into the cache the first time."""
    version = version or pinned_version()
    found = _cached(version)
    if not found:
        cache_dir().mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--disable-pip-version-check",
                        "--python-version", WHEEL_PYTHON, "--only-binary", ":all:", "-d", str(cache_dir()),
                        f"{PROJECT}=={version}"], check=True, timeout=900)
        found = _cached(version)
    assert found, f"pip download {PROJECT}=={version} left no wheel in {cache_dir()}"
    return found[-1]


@dataclass(frozen=True)
class ParamMapping:
    cls: str  # AutoMapping, QKVMapping, ...
    megatron: str
    hf: str | tuple[tuple[str, str], ...]  # a name, or (role, name) pairs: q/k/v, gate/up

    def hf_names(self) -> list[str]:
        return [self.hf] if isinstance(self.hf, str) else [name for _, name in self.hf]


class BridgeSource:
    def __init__(self, files: Mapping[str, str], origin: str, version: str):
        self.files = dict(files)  # "megatron/bridge/a/b.py" -> text
        self.origin = origin
        self.version = version
        self._trees: dict[str, ast.Module] = {}

    @classmethod
    def from_wheel(cls, path: Path) -> BridgeSource:
        with zipfile.ZipFile(path) as archive:
            files = {n: archive.read(n).decode("utf-8", "replace") for n in archive.namelist()
                     if n.startswith("megatron/bridge/") and n.endswith(".py")}
        return cls(files, str(path), path.name.split("-")[1])

    @classmethod
    def from_directory(cls, package_dir: Path) -> BridgeSource:
        root = package_dir.parents[1]  # .../megatron/bridge -> site-packages
        files = {str(p.relative_to(root)): p.read_text(errors="replace") for p in package_dir.rglob("*.py")}
        return cls(files, str(package_dir), importlib.metadata.version(PROJECT))

    @classmethod
    def locate(cls) -> BridgeSource:
        try:
            spec = importlib.util.find_spec("megatron.bridge")
        except ModuleNotFoundError:  # no megatron namespace at all
            spec = None
        if spec is not None and spec.origin:
            return cls.from_directory(Path(spec.origin).parent)
        return cls.from_wheel(wheel())

    # -- modules ---------------------------------------------------------------------------------------

    def tree(self, path: str) -> ast.Module:
        if path not in self._trees:
            self._trees[path] = ast.parse(self.files[path])
        return self._trees[path]

    def path_of(self, module: str) -> str | None:
        base = module.replace(".", "/")
        return next((p for p in (f"{base}.py", f"{base}/__init__.py") if p in self.files), None)

    def _class(self, path: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
        """Where the class ``name`` that ``path`` uses is defined (following ``from x import name``)."""
        if depth > 8:
            return None
        tree = self.tree(path)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path, node
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        target = self.path_of(node.module)
                        return self._class(target, alias.name, depth + 1) if target else None
        return None

    def _init_params(self, path: str, name: str) -> list[str] | None:
        """``__init__``'s parameters (after self) of a class, from its nearest definition in the Bridge."""
        found = self._class(path, name)
        if found is None:
            return None
        where, node = found
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                args = item.args
                return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]][1:]
        for base in node.bases:
            base_name = base.value if isinstance(base, ast.Subscript) else base
            if isinstance(base_name, ast.Name):
                params = self._init_params(where, base_name.id)
                if params is not None:
                    return params
        return None

    # -- bridges ------------------------------------------------------------------------------------------

    def bridge(self, model_type: str) -> tuple[str, ast.ClassDef]:
        """The bridge class registered for ``model_type``: (its file, its class)."""
        found = []
        for path in sorted(self.files):
            if not path.startswith("megatron/bridge/models/") or f'"{model_type}"' not in self.files[path]:
                continue
            for node in self.tree(path).body:
                if isinstance(node, ast.ClassDef):
                    for deco in node.decorator_list:
                        if (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)
                                and deco.func.attr == "register_bridge"
                                and any(k.arg == "model_type" and isinstance(k.value, ast.Constant)
                                        and k.value.value == model_type for k in deco.keywords)):
                            found.append((path, node))
        if len(found) != 1:
            raise LookupError(f"{len(found)} bridges registered for model_type {model_type!r} in {self.origin}")
        return found[0]

    @staticmethod
    def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef:
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == name:
                return item
        raise LookupError(f"{node.name} defines no {name}()")

    def mappings(self, model_type: str) -> list[ParamMapping]:
        """The mappings of the bridge's ``mapping_registry()``; anything not read is an error (a new idiom)."""
        path, node = self.bridge(model_type)
        func = self._method(node, "mapping_registry")
        dicts: dict[str, dict[str, str]] = {}
        for sub in ast.walk(func):
            if (isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name)
                    and isinstance(sub.value, ast.Dict)):
                items = {k.value: v.value for k, v in zip(sub.value.keys, sub.value.values)
                         if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}
                if len(items) != len(sub.value.keys):
                    raise LookupError(f"{path}: {sub.targets[0].id} has entries that are not string literals")
                dicts[sub.targets[0].id] = items
        out: list[ParamMapping] = []
        done: set[int] = set()
        for sub in ast.walk(func):  # for megatron_param, hf_param in d.items(): list.append(XMapping(...))
            if (isinstance(sub, ast.For) and isinstance(sub.iter, ast.Call) and isinstance(sub.iter.func, ast.Attribute)
                    and sub.iter.func.attr == "items" and isinstance(sub.iter.func.value, ast.Name)
                    and sub.iter.func.value.id in dicts and isinstance(sub.target, ast.Tuple)):
                names = [t.id for t in sub.target.elts if isinstance(t, ast.Name)]
                for call in ast.walk(sub):
                    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and self._is_mapping(path, call):
                        done.add(id(call))
                        for megatron, hf in dicts[sub.iter.func.value.id].items():
                            out.append(self._bind(path, call, dict(zip(names, (megatron, hf)))))
        for sub in ast.walk(func):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and id(sub) not in done:
                if self._is_mapping(path, sub):
                    out.append(self._bind(path, sub, {}))
            elif isinstance(sub, ast.Starred) and isinstance(sub.value, ast.Call):
                raise LookupError(f"{path}: {node.name}.mapping_registry() adds mappings built by "
                                  f"{ast.unparse(sub.value.func)}(), which this reader does not expand")
        if not out:
            raise LookupError(f"{path}: {node.name}.mapping_registry() has no mapping this reader understands")
        return out

    def _is_mapping(self, path: str, call: ast.Call) -> bool:
        assert isinstance(call.func, ast.Name)
        return call.func.id.endswith("Mapping") and self._class(path, call.func.id) is not None

    def _bind(self, path: str, call: ast.Call, names: Mapping[str, str]) -> ParamMapping:
        cls = call.func.id  # type: ignore[union-attr]
        params = self._init_params(path, cls)
        if params is None:
            raise LookupError(f"{path}: no __init__ found for {cls}")

        def value(expr: ast.expr) -> Any:
            if isinstance(expr, ast.Constant):
                return expr.value
            if isinstance(expr, ast.Name) and expr.id in names:
                return names[expr.id]
            return None  # not a literal: permute_dims=..., a computed name (checked below)

        bound = {params[i]: value(a) for i, a in enumerate(call.args)}
        bound.update({k.arg: value(k.value) for k in call.keywords if k.arg})
        megatron = bound.pop("megatron_param", None)
        if "hf_param" in bound:
            hf: Any = bound["hf_param"]
        else:
            hf = tuple((k, v) for k, v in bound.items() if isinstance(v, str))
        if not isinstance(megatron, str) or not (isinstance(hf, str) or hf):
            raise LookupError(f"{path}:{call.lineno}: {ast.unparse(call)} names no literal parameters")
        return ParamMapping(cls, megatron, hf)

    def provider_settings(self, model_type: str, config: Any) -> dict[str, Any]:
        """``provider.<field> = ...`` of the bridge's ``provider_bridge()``, evaluated on ``config`` (a field whose
        value this reader cannot work out is left out)."""
        _, node = self.bridge(model_type)
        env = {"hf_config": config, "text_config": config.text_config, "vision_config": config.vision_config}
        missing = object()

        def evaluate(expr: ast.expr) -> Any:
            if isinstance(expr, ast.Constant):
                return expr.value
            if isinstance(expr, ast.Name) and expr.id in env:
                return env[expr.id]
            if isinstance(expr, ast.Attribute):
                owner = evaluate(expr.value)
                return missing if owner is missing else getattr(owner, expr.attr, missing)
            if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "getattr"
                    and 2 <= len(expr.args) <= 3):
                owner, attr = evaluate(expr.args[0]), evaluate(expr.args[1])
                default = evaluate(expr.args[2]) if len(expr.args) == 3 else missing
                return missing if owner is missing else getattr(owner, attr, default)
            return missing

        out: dict[str, Any] = {}
        for sub in ast.walk(self._method(node, "provider_bridge")):
            if isinstance(sub, ast.Assign):
                for target in sub.targets:
                    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                            and target.value.id == "provider"):
                        got = evaluate(sub.value)
                        if got is not missing:
                            out[target.attr] = got
        return out


# -- the names an export yields ---------------------------------------------------------------------------


def _expand_indices(pattern: str, config: Any) -> list[str]:
    """``*`` (a layer index; not ``**``) -> every index, counted from the config by the path segment before it."""
    parts = re.split(r"(?<!\*)\*(?!\*)", pattern)
    if len(parts) == 1:
        return [pattern]
    ranges = []
    for before in parts[:-1]:
        segment = before.rstrip(".").rpartition(".")[2]
        if segment not in _COUNTS:
            raise LookupError(f"{pattern}: no count known for the '*' after {segment!r}")
        ranges.append(range(_COUNTS[segment](config)))
    return ["".join(itertools.chain.from_iterable(zip(parts, map(str, idx)))) + parts[-1]
            for idx in itertools.product(*ranges)]


def _expand_rest(pattern: str, candidates: Iterable[str]) -> list[str]:
    """``**`` (any nested path): the paths under it in the Hugging Face model, found by matching the pattern
    against the model's parameter names with or without their leading ``model.``; the result keeps the pattern's
    own prefix (what the Bridge yields)."""
    regex = re.compile(r"(?:model\.)?" + re.escape(pattern).replace(r"\*\*", "(.*)"))
    out = []
    for name in candidates:
        match = regex.fullmatch(name)
        if match:
            resolved = pattern
            for group in match.groups():
                resolved = resolved.replace("**", group, 1)
            out.append(resolved)
    if not out:
        raise LookupError(f"{pattern}: matches no parameter of the Hugging Face model")
    return sorted(set(out))


def export_names(source: BridgeSource, model_type: str, config: Any,
                 model_parameters: Iterable[str]) -> tuple[list[str], list[ParamMapping]]:
    """The Hugging Face names ``export_hf_weights`` yields for a model of ``config`` (in table order), and the
    mappings left out because the provider turns their weight off (``add_qkv_bias = False``, ...)."""
    settings = source.provider_settings(model_type, config)
    model_parameters = list(model_parameters)
    names: list[str] = []
    skipped: list[ParamMapping] = []
    for mapping in source.mappings(model_type):
        fields = [f for fragment, f in OPTIONAL_WEIGHTS
                  if mapping.megatron.startswith("language_model.") and fragment in mapping.megatron]
        for field in fields:
            if field not in settings:
                raise LookupError(f"{mapping.megatron} exists only with provider.{field}, which "
                                  f"{model_type}'s provider_bridge() does not set readably")
        if not all(settings[f] for f in fields):
            skipped.append(mapping)
            continue
        for pattern in mapping.hf_names():
            for name in _expand_indices(pattern, config):
                names.extend(_expand_rest(name, model_parameters) if "**" in name else [name])
    return list(dict.fromkeys(names)), skipped


def shape_for(name: str, expected: Mapping[str, tuple[int, ...]], skip: tuple[str, ...] = ()) -> tuple[int, ...]:
    """The shape the weight ``name`` has in the model, found without :mod:`trainers.megatron.names`: the one
    parameter (outside the prefixes ``skip``) whose name is ``name`` or ends with it less its leading ``model.``
    ((0,) when none or several)."""
    tail = "." + name.removeprefix("model.")
    found = [n for n in expected if not n.startswith(skip) and (n == name or n.endswith(tail))]
    return tuple(expected[found[0]]) if len(found) == 1 else (0,)
