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
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple (immutable) default for a setting")
    return dataclasses.field(default=default, metadata=metadata)
