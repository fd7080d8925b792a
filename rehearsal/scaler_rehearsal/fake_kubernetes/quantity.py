"""Kubernetes resource quantities (`500m`, `2`, `1.5Gi`, `128974848`, `129e6`), as the API server parses them.

A quantity is a decimal number and an optional suffix: a binary one (Ki Mi Gi Ti Pi Ei), a decimal one
(n u m k M G T P E) or a decimal exponent (e3, E-2). Values are kept as exact fractions: CPU in cores, memory in
bytes.
"""

from __future__ import annotations

import re
from fractions import Fraction

#: What the API server answers for a quantity it cannot parse (its own words).
QUANTITY_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

_PATTERN = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))((?:[KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


class QuantityError(ValueError):
    pass


def parse_quantity(value: object) -> Fraction:
    """The quantity's value (cores for CPU, bytes for memory); QuantityError with the API server's words if it is
    not one. A JSON number is a quantity too (`cpu: 2`)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(QUANTITY_ERROR)
    if isinstance(value, (int, float)):
        return Fraction(value)
    match = _PATTERN.match(value.strip())
    if match is None or value != value.strip():
        raise QuantityError(QUANTITY_ERROR)
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def format_cpu(cores: Fraction) -> str:
    """`Fraction(1, 2)` -> `500m`, `Fraction(2)` -> `2`."""
    if cores.denominator == 1:
        return str(cores.numerator)
    return f"{round(cores * 1000)}m"


def format_memory(size: Fraction) -> str:
    """Bytes as the largest binary suffix that divides them (`16Gi`), else plain bytes."""
    whole = int(size)
    for suffix, factor in sorted(_BINARY.items(), key=lambda item: -item[1]):
        if whole and whole % factor == 0:
            return f"{whole // factor}{suffix}"
    return str(whole)
