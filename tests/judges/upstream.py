"""OSWorld's own metric, getter and controller modules, loaded for conformance tests (never by the project itself).

``desktop-env`` (OSWorld's package on PyPI) pins torch ~2.5 and transformers ~4.35, so ``scripts/install.sh``
installs it with ``--no-deps``; its ``desktop_env.evaluators.metrics`` package imports every metric module at
once, including ``easyocr`` (needs torchvision, which does not install here) and PDF/audio/browser packages.
:func:`metrics_module` registers ``desktop_env``, ``desktop_env.evaluators`` and ``.metrics`` as bare packages
(their ``__init__`` never runs) and imports one module file (``gimp``, ``docs``, ``slides``, ...), so its
relative and absolute imports of sibling modules work and nothing else runs. Third-party modules it imports that the
compared functions never call and that are not installed are *stubs* (named per call); calling into a stub raises,
so a conformance test cannot silently pass through one.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any, Sequence

PACKAGES = ("desktop_env", "desktop_env.evaluators", "desktop_env.evaluators.metrics")


class _Stub(types.ModuleType):
    """A module whose every attribute is a callable that raises: imported, never used."""

    __path__: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def unavailable(*_: Any, **__: Any) -> Any:
            raise RuntimeError(f"{self.__name__}.{name} is a stub in this conformance test")

        return unavailable


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: Sequence[str]):
        self.roots = set(roots)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _Stub(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


@functools.lru_cache(maxsize=1)
def _root() -> Path:
    spec = importlib.util.find_spec("desktop_env")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("desktop-env is not installed: bash scripts/install.sh installs it (pip --no-deps)")
    return Path(list(spec.submodule_search_locations)[0])


def _absent(name: str) -> bool:
    """Not installed (or stubbed before): only such modules are stubbed, never a real one another test imports."""
    if name in sys.modules:
        return isinstance(sys.modules[name], _Stub)
    return importlib.util.find_spec(name) is None


def _bare_packages(names: Sequence[str]) -> None:
    root = _root()
    for package_name in names:
        if package_name not in sys.modules:
            package = types.ModuleType(package_name)
            package.__path__ = [str(root.joinpath(*package_name.split(".")[1:]))]  # no __init__ runs
            sys.modules[package_name] = package


def _import_with_stubs(module: str, stubs: Sequence[str]) -> types.ModuleType:
    """Import ``module`` with the absent ``stubs`` stubbed; the stubs leave ``sys.modules`` afterwards (the
    imported module keeps its references), so no later import anywhere gets a stub instead of an error."""
    finder = _StubFinder([s for s in stubs if _absent(s)])
    before = set(sys.modules)
    sys.meta_path.insert(0, finder)
    try:
        return importlib.import_module(module)
    finally:
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:
            if isinstance(sys.modules[name], _Stub):
                del sys.modules[name]


def metrics_module(name: str, stubs: Sequence[str] = ()) -> types.ModuleType:
    """``desktop_env/evaluators/metrics/<name>.py`` as a module; ``stubs``: top-level imports to stub."""
    _bare_packages(PACKAGES)
    return _import_with_stubs(f"{PACKAGES[-1]}.{name}", stubs)


def getters_module(name: str, stubs: Sequence[str] = ()) -> types.ModuleType:
    """``desktop_env/evaluators/getters/<name>.py`` as a module (the getters package's ``__init__``, which imports
    every getter module, never runs); ``stubs`` as for :func:`metrics_module`."""
    _bare_packages(("desktop_env", "desktop_env.evaluators", "desktop_env.evaluators.getters"))
    return _import_with_stubs(f"desktop_env.evaluators.getters.{name}", stubs)


def controllers_module(name: str, stubs: Sequence[str] = ()) -> types.ModuleType:
    """``desktop_env/controllers/<name>.py`` as a module. ``setup`` (``SetupController``) imports playwright, pydrive
    and requests-toolbelt (real: the ``dev`` extra) and ``desktop_env.evaluators.metrics.utils`` for
    ``compare_urls`` (only that metric module runs); ``stubs`` as for :func:`metrics_module`."""
    _bare_packages(PACKAGES)
    return _import_with_stubs(f"desktop_env.controllers.{name}", stubs)


def desktop_env_module(stubs: Sequence[str] = ()) -> types.ModuleType:
    """``desktop_env/desktop_env.py`` (``DesktopEnv``, OSWorld's harness) as a module, run unchanged: its imports
    load every metric, getter, controller and provider module upstream ships (the package ``desktop_env`` itself is
    bare: its ``__init__`` never runs); ``stubs`` as for :func:`metrics_module`."""
    _bare_packages(("desktop_env",))
    return _import_with_stubs("desktop_env.desktop_env", stubs)
