"""How a configuration field is declared: default, help text, flag spellings and constraints.

Sections are plain frozen dataclasses so that runtime processes read them without importing
pydantic; `scaler.config.loader` turns a section into a pydantic-settings model to load it from the
command line, the environment and TOML files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

#: Keys of a field's metadata.
HELP = "help"
SHORT = "short"  #: extra flag spellings, e.g. ("-wt",) or ("-p",)
ALIASES = "aliases"  #: other long names accepted on the command line and in TOML, e.g. ("num_of_workers",)
POSITIONAL = "positional"  #: the field is the command's positional argument
GT = "gt"
GE = "ge"
CHOICES = "choices"
HIDDEN = "hidden"  #: accepted but not listed in -h
BYTE_SIZE = "byte_size"  #: an int of bytes, also given as `200MB` or `4GiB` (`scaler.config.byte_size`)

#: Words a boolean setting accepts as its value (case-insensitive), e.g. `-p False`, `--protected=yes`.
BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0", "t", "f", "y", "n"})


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    short: Sequence[str] = (),
    aliases: Sequence[str] = (),
    positional: bool = False,
    gt: float | None = None,
    ge: float | None = None,
    choices: Sequence[str] | None = None,
    hidden: bool = False,
    byte_size: bool = False,
) -> Any:
    metadata: dict[str, Any] = {HELP: help, SHORT: tuple(short), ALIASES: tuple(aliases), POSITIONAL: positional}
    if gt is not None:
        metadata[GT] = gt
    if ge is not None:
        metadata[GE] = ge
    if choices is not None:
        metadata[CHOICES] = tuple(choices)
    if hidden:
        metadata[HIDDEN] = True
    if byte_size:
        metadata[BYTE_SIZE] = True
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple (immutable) default for a setting")
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class RetiredSetting:
    """A setting of the reference that users' files and command lines carry but that nothing here reads. It is
    accepted (a value outside `values` is refused as before, naming them), a note on stderr says it is ignored
    and why, and it is no field of any section, so no code can come to depend on it."""

    name: str  #: the long name: `--network-backend`, TOML key `network_backend`
    why: str  #: why it is ignored, for the note
    short: tuple[str, ...] = ()
    values: tuple[str, ...] | None = None  #: the values accepted; None: any value
    is_flag: bool = False  #: a boolean flag (`-hps` alone, or with a boolean word)

    @property
    def option_strings(self) -> tuple[str, ...]:
        return (*self.short, f"--{self.name.replace('_', '-')}")

    def problem(self, value: object) -> str | None:
        """What is wrong with a value given for it, or None."""
        if self.is_flag:
            ok = isinstance(value, bool) or str(value).lower() in BOOLEAN_WORDS
            return None if ok else "expected a boolean (true/false, yes/no, 1/0)"
        if self.values is not None and value not in self.values:
            return f"allowed: {', '.join(self.values)}"
        return None
