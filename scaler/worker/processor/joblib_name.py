"""joblib's "scaler" backend by name in every processor, whatever the task imported.

joblib finds a third-party backend only by registration in the process that names it (it reads no entry points), so
a task calling `Parallel(backend="scaler")` (or `parallel_config(backend="scaler")`) would fail with "Invalid backend:
scaler" unless its own module imported `scaler.joblib`. A processor therefore watches for joblib: once
`joblib.parallel` has been imported (by whatever the task runs), joblib's registry gets the name "scaler", whose
factory imports `scaler.compat.joblib` (the backend; importing it registers the backend class itself) when a
`Parallel` first asks for it. Nothing is imported until then: a processor whose tasks never use joblib pays for one
name lookup per import.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

WATCHED = "joblib.parallel"
NAME = "scaler"
BACKEND_MODULE = "scaler.compat.joblib"  #: by name: the worker layer does not import the front ends


def install() -> None:
    """Add the name now if joblib is already imported, else when it is."""
    module = sys.modules.get(WATCHED)
    if module is not None:
        _add_name(module)
        return
    if not any(isinstance(finder, _Watcher) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Watcher())


def _backend(**kwargs: Any) -> Any:
    """joblib's factory for "scaler" until `scaler.compat.joblib` replaces it with its backend class."""
    backend_module = importlib.import_module(BACKEND_MODULE)
    backend_module.register()
    return backend_module.ScalerBackend(**kwargs)


def _add_name(module: types.ModuleType) -> None:
    backends = getattr(module, "BACKENDS", None)
    if isinstance(backends, dict):
        backends.setdefault(NAME, _backend)


class _Watcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of `joblib.parallel` so that the name is added once it has run."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._inner.exec_module(module)
        _add_name(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... of the wrapped loader
        return getattr(self._inner, name)
