"""Byte sizes in settings: `200MB`, `4GiB`, `1.5 GB` or a plain number of bytes, read and written one way.

Every byte-size setting goes through `parse_byte_size` (the loader attaches it to fields declared with
`setting(..., byte_size=True)`), so each accepts the same forms and refuses the same way. Decimal units are
powers of 1000 and binary units powers of 1024, as the SI and IEC define them; units are case-insensitive
(`200mb` is `200MB`), and a lone `K`, `M`, `G` or `T` is not accepted, since it could mean either.
"""

from __future__ import annotations

import math
import re

#: unit (lower case) -> bytes
UNITS: dict[str, int] = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}

#: How messages describe what a byte-size setting accepts.
ACCEPTED_FORMS = (
    "a number of bytes, or a number with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. 200MB or 4GiB"
)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_byte_size(value: object) -> int:
    """The number of bytes `value` stands for: an int, or a string of digits with an optional unit.
    Raises ValueError saying which forms are accepted (the loader names the setting)."""
    if isinstance(value, bool):
        raise ValueError(f"expected {ACCEPTED_FORMS}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    match = _SIZE.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"expected {ACCEPTED_FORMS}")
    number, unit = match.groups()
    scale = UNITS.get(unit.lower() or "b")
    if scale is None:
        raise ValueError(f"unknown unit {unit!r}: expected {ACCEPTED_FORMS}")
    if "." not in number:
        return int(number) * scale
    return math.floor(float(number) * scale)


def format_byte_size(size: int) -> str:
    """`size` for people: `4 GiB`, `1.5 MiB`, `512 bytes` (binary units, at most one decimal)."""
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            shown = f"{size / scale:.1f}".removesuffix(".0")
            return f"{shown} {unit}"
    return f"{size} byte" if size == 1 else f"{size} bytes"
