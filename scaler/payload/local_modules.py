"""The client's own modules travel with its tasks when its workers run elsewhere (a burst to the cloud).

A function defined in a module of the working directory (`analysis.py` beside a notebook, a package of the
project that is not installed) is pickled by reference: the worker imports the module by name, which a cloud
unit does not have. A client connected to a stack that ships local modules (its connection file says so:
`security.connection_files`) registers such modules with cloudpickle to be pickled *by value* before it serialises a
function: the function, and what it uses from those modules, travel in the task, wherever the notebook's working
directory is. Installed distributions are not shipped this way: the manager installs them on the units.

A module is local when its file is neither in the standard library nor in a site-packages folder, and no
installed distribution provides it (an editable install of the user's package is shipped as a wheel instead).
"""

from __future__ import annotations

import importlib.metadata
import os
import site
import sys
import sysconfig
from functools import lru_cache
from types import ModuleType

import cloudpickle

_registered: set[str] = set()


def register_local_modules() -> None:
    """Register every local top-level module now imported with cloudpickle (each once)."""
    for name in list(sys.modules):
        if name in _registered or "." in name:
            continue
        module = sys.modules.get(name)
        # an alias (scaler.compat.ray stands in for `ray` under that key) is the module of its own name's package
        if module is not None and getattr(module, "__name__", None) == name and is_local(module):
            try:
                cloudpickle.register_pickle_by_value(module)
            except (ValueError, TypeError):
                continue
            _registered.add(name)


def is_local(module: ModuleType) -> bool:
    name = module.__name__
    if name == "__main__" or name in sys.builtin_module_names or name.partition(".")[0] == "scaler":
        return False
    path = getattr(module, "__file__", None)
    if not path:
        return False
    real = os.path.realpath(path)
    if any(real.startswith(root + os.sep) for root in _installed_roots()):
        return False
    return name not in _distributed_modules()


@lru_cache(maxsize=1)
def _installed_roots() -> tuple[str, ...]:
    roots = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    roots.add(site.getusersitepackages())
    roots.update(path for path in sys.path if path.endswith(("site-packages", "dist-packages")))
    return tuple(sorted(os.path.realpath(root) for root in roots if root))


@lru_cache(maxsize=1)
def _distributed_modules() -> frozenset[str]:
    return frozenset(importlib.metadata.packages_distributions())
