"""The protocol's Cap'n Proto schemas, loaded once per process: the codec frames with them, and the generated readers
(codec_structs.py) read fields through their field objects (`field_of`).

They are pycapnp's where it is installed; elsewhere (Pyodide in a browser, which has no pycapnp), or with
`SCALER_PURE_CAPNP=1`, the pure-Python reader and builder of `pure_capnp.py`, laid out from the same schemas: the same
generated codec runs over either, and either reads what the other wrote."""

from __future__ import annotations

import os
from typing import Any

#: Which implementation this process uses: "pycapnp" or "pure".
BACKEND: str
MESSAGE: Any
STORAGE: Any


def _load() -> tuple[str, Any, Any]:
    if os.environ.get("SCALER_PURE_CAPNP", "") not in ("", "0"):
        return _pure()
    try:
        import capnp
    except ImportError:
        return _pure()
    capnp.remove_import_hook()
    here = os.path.dirname(__file__)
    return (
        "pycapnp",
        capnp.load(os.path.join(here, "message.capnp")),
        capnp.load(os.path.join(here, "object_storage.capnp")),
    )


def _pure() -> tuple[str, Any, Any]:
    from scaler.protocol import pure_capnp

    return "pure", pure_capnp.load("m"), pure_capnp.load("sm")


BACKEND, MESSAGE, STORAGE = _load()
#: each schema by the name the generated code gives the module of its values
_BY_MODULE = {"m": MESSAGE, "sm": STORAGE}


def field_of(module: str, path: str) -> Any:
    """The field object of `Struct.field` (or `Struct.group.field`) in the schema of `module` ("m", "sm"): a reader's
    `_get_by_field(f)` is about 40% cheaper than `_get(name)`, which finds the field by its name on every read."""
    struct, *groups, name = path.split(".")
    schema = getattr(_BY_MODULE[module], struct).schema
    for group in groups:
        schema = schema.fields[group].schema
    return schema.fields[name]
