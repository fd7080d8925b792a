"""A package's public names, each imported from its module when first used (PEP 562's module `__getattr__`): a
process that needs one module of a package does not import the package's whole surface."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str], namespace: MutableMapping[str, Any]) -> Callable[[str], Any]:
    """The `__getattr__` of `package`: a name of `homes` is imported from its module (`homes[name]`) and kept in the
    package's `namespace` (its `globals()`), so that it is looked up once; any other name is an AttributeError."""

    def __getattr__(name: str) -> Any:
        module_name = homes.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name), name)
        namespace[name] = value
        return value

    return __getattr__
