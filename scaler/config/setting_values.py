"""A setting's typed value from what was given for it: a flag's text, an environment variable's text, a TOML value.

Pure (no I/O). The rules, by the field's declared type (`scaler.config.fields`):

- `bool`: a boolean, 0 or 1 (also 0.0, 1.0), or one of the words of `fields.BOOLEAN_WORDS` in any case;
- `int`: an integer, a boolean (1, 0), a float with no fraction (between -2**63 and 2**63), or text: ASCII digits
  with an optional sign, single underscores between digits and trailing zero decimals (`1_000`, `+8`, `5.00`);
- `float`: a number or a boolean, or text: a decimal number with an optional exponent, `inf`, `infinity` or `nan`
  (any case, optional sign), single underscores inside (`1_000.5`, `2e3`, `.5`);
- `str`: text only (`bind_address = 8516` in a file is refused);
- `tuple[str, ...]` (a list setting): a list of texts, or one text;
- text given for a number is read without the whitespace around it.

Then a field's metadata: `choices` take any case and give the declared spelling, a `byte_size` takes a unit
(`scaler.config.byte_size`), `gt` and `ge` bound a number. A value that does not fit raises `InvalidValue`; the loader
says which setting, where the value came from and what is allowed.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Sequence
from typing import Any

from scaler.config.byte_size import parse_byte_size
from scaler.config.fields import BOOLEAN_WORDS, BYTE_SIZE, CHOICES, GE, GT

#: What is stripped around the text of a number: Unicode's White_Space characters (not Python's str.strip set,
#: which also strips the separators U+001C to U+001F).
_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)

_INTEGER = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")
_ZERO_DECIMALS = re.compile(r"\.0+$")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPECIAL_FLOAT = re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)
_INT_FLOAT_BOUND = 2.0**63

_TRUE_WORDS = frozenset({"true", "yes", "on", "1", "t", "y"})


class InvalidValue(Exception):
    """A value that does not fit its setting. `count`: how many parts of it do not (each bad item of a list)."""

    def __init__(self, count: int = 1) -> None:
        super().__init__(count)
        self.count = count


@dataclasses.dataclass(frozen=True)
class SettingRule:
    """What one field of a section accepts."""

    field: dataclasses.Field[Any]
    name: str
    kind: type  #: bool, int, float, str, or tuple (a list of strings)
    optional: bool  #: None is a value
    required: bool  #: no default
    choices: tuple[str, ...] | None
    byte_size: bool
    gt: float | None
    ge: float | None

    def value(self, given: Any) -> Any:
        """The typed value of `given`; raises InvalidValue."""
        given = self._before(given)
        if given is None and self.optional:
            return None
        value = _KINDS[self.kind](given)
        if (self.gt is not None and not value > self.gt) or (self.ge is not None and not value >= self.ge):
            raise InvalidValue()
        return value

    def _before(self, given: Any) -> Any:
        if self.choices is not None:
            return _choice(self.choices, given)
        if self.byte_size:
            return _byte_size(given)
        if self.kind is tuple and isinstance(given, str):
            return (given,)
        return given


def setting_rules(section_type: type) -> tuple[SettingRule, ...]:
    """The rules of the fields of a section dataclass, in field order (made once per section)."""
    return _rules(section_type)


@functools.cache
def _rules(section_type: type) -> tuple[SettingRule, ...]:
    hints = typing.get_type_hints(section_type)
    return tuple(_rule(field, hints[field.name]) for field in dataclasses.fields(section_type))


def _rule(field: dataclasses.Field[Any], hint: Any) -> SettingRule:
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        arguments = [argument for argument in typing.get_args(hint) if argument is not type(None)]
        optional = len(arguments) < len(typing.get_args(hint))
        if len(arguments) != 1:
            raise TypeError(f"{field.name}: a setting has one type (and may be None), not {hint}")
        hint = arguments[0]
    kind = tuple if typing.get_origin(hint) is tuple else hint
    if kind not in _KINDS or (kind is tuple and typing.get_args(hint) != (str, ...)):
        raise TypeError(f"{field.name}: no rule for a setting of type {hint}")
    choices = field.metadata.get(CHOICES)
    return SettingRule(
        field=field,
        name=field.name,
        kind=kind,
        optional=optional,
        required=field.default is dataclasses.MISSING,
        choices=tuple(choices) if choices is not None else None,
        byte_size=bool(field.metadata.get(BYTE_SIZE)),
        gt=field.metadata.get(GT),
        ge=field.metadata.get(GE),
    )


def _choice(choices: Sequence[str], given: Any) -> Any:
    """The declared spelling of a choice written in any case; anything but text is left to the type's rule."""
    if not isinstance(given, str):
        return given
    for choice in choices:
        if choice.lower() == given.lower():
            return choice
    raise InvalidValue()


def _byte_size(given: Any) -> Any:
    if given is None:
        return None
    try:
        return parse_byte_size(given)
    except ValueError:
        raise InvalidValue() from None


def _bool(given: Any) -> bool:
    if isinstance(given, bool):
        return given
    if isinstance(given, (int, float)) and given in (0, 1):
        return bool(given)
    if isinstance(given, str) and given.lower() in BOOLEAN_WORDS:
        return given.lower() in _TRUE_WORDS
    raise InvalidValue()


def _int(given: Any) -> int:
    if isinstance(given, int):
        return int(given)
    if isinstance(given, float):
        if given.is_integer() and -_INT_FLOAT_BOUND < given < _INT_FLOAT_BOUND:
            return int(given)
        raise InvalidValue()
    if isinstance(given, str):
        text = _ZERO_DECIMALS.sub("", given.strip(_WHITESPACE), count=1)
        if _INTEGER.fullmatch(text):
            try:
                return int(text)
            except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
                pass
    raise InvalidValue()


def _float(given: Any) -> float:
    if isinstance(given, (int, float)):
        try:
            return float(given)
        except OverflowError:  # an integer beyond the largest float
            raise InvalidValue() from None
    if isinstance(given, str):
        text = given.strip(_WHITESPACE)
        if not _is_float_text(text) and _has_inner_underscores(given):
            text = given.replace("_", "")  # underscores: no whitespace around the number
        if _is_float_text(text):
            return float(text)
    raise InvalidValue()


def _is_float_text(text: str) -> bool:
    return bool(_DECIMAL.fullmatch(text) or _SPECIAL_FLOAT.fullmatch(text))


def _has_inner_underscores(text: str) -> bool:
    return "_" in text and "__" not in text and not text.startswith("_") and not text.endswith("_")


def _str(given: Any) -> str:
    if isinstance(given, str):
        return given
    raise InvalidValue()


def _strings(given: Any) -> tuple[str, ...]:
    if not isinstance(given, (list, tuple, set, frozenset)):
        raise InvalidValue()
    bad = sum(1 for item in given if not isinstance(item, str))
    if bad:
        raise InvalidValue(bad)
    return tuple(given)


_KINDS: dict[type, typing.Callable[[Any], Any]] = {bool: _bool, int: _int, float: _float, str: _str, tuple: _strings}
