"""How a configuration field is declared: default, help text, flag spellings, constraints, and where else it goes.

A setting is declared once, as a field of its component's section (`scaler.config.sections`); everything else
follows from that declaration:

- the long flag `--field-name` and the TOML key `field_name` (plus `short` and `aliases`): `scaler.config.cli`,
  `scaler.config.toml_file`, and shell completion, which reads the parser;
- the environment variables `SCALER_<SECTION>_FIELD_NAME` and `SCALER_FIELD_NAME`, the validation and its
  messages: `scaler.config.loader`;
- `core`: the field of the component's pure-core settings it fills (the scheduler's `CoreSettings`), copied by
  `core_values` (a renamed field is named here, once);
- `combo`: the keyword parameter of `SchedulerClusterCombo` that sets it (`scaler.config.combo`), with the
  combo's own default when it differs (`combo_default`);
- its row in docs/settings.md (`python -m scaler.config.reference`).

Sections are plain frozen dataclasses, which runtime processes read without the loader;
`scaler.config.loader` loads a section from the command line, the environment and TOML files, checking each value
by its field's declaration (`scaler.config.setting_values`).
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
CORE = "core"  #: the field of the component's pure-core settings this setting fills (`core_values`)
COMBO = "combo"  #: the `SchedulerClusterCombo` keyword parameter that sets it (`scaler.config.combo`)
COMBO_DEFAULT = "combo_default"  #: the combo's default, where it differs from the section's
SHOWN_DEFAULT = "shown_default"  #: how docs/settings.md states a default computed on the machine ("CPU count")

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
    core: str | bool = False,
    combo: str | bool = False,
    combo_default: Any = dataclasses.MISSING,
    shown_default: str | None = None,
) -> Any:
    """A section field. `core`: it fills the field of that name of the component's core settings (True: the same
    name). `combo`: `SchedulerClusterCombo` takes it as the keyword of that name (True: the same name), with
    `combo_default` as its default when that differs from `default`."""
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
    if shown_default is not None:
        metadata[SHOWN_DEFAULT] = shown_default
    if core:
        metadata[CORE] = core
    if combo:
        metadata[COMBO] = combo
        if combo_default is not dataclasses.MISSING:
            metadata[COMBO_DEFAULT] = combo_default
    elif combo_default is not dataclasses.MISSING:
        raise TypeError("combo_default is only for a setting the combo takes (combo=...)")
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple (immutable) default for a setting")
    return dataclasses.field(default=default, metadata=metadata)


def core_name(field: dataclasses.Field[Any]) -> str | None:
    """The name of the core settings' field this setting fills, or None."""
    core = field.metadata.get(CORE)
    return None if not core else field.name if core is True else str(core)


def combo_name(field: dataclasses.Field[Any]) -> str | None:
    """The `SchedulerClusterCombo` keyword that sets this setting, or None."""
    combo = field.metadata.get(COMBO)
    return None if not combo else field.name if combo is True else str(combo)


def core_values(section: Any) -> dict[str, Any]:
    """{core settings field: value} for every setting of `section` declared with `core`: the one copy of a
    section into its component's core settings (`scaler.scheduler.process.core_settings_of`)."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(section):
        name = core_name(field)
        if name is not None:
            values[name] = getattr(section, field.name)
    return values


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
    combo: bool = False  #: `SchedulerClusterCombo` still takes it as a keyword, noted and ignored the same way

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
