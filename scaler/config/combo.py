"""The settings `SchedulerClusterCombo` takes as keywords, from their declarations.

A setting of the combo's sections (object storage, scheduler, worker) declared with `combo=` (`fields.setting`)
is a keyword parameter of `SchedulerClusterCombo`: the keyword's name (the field's, or the one `combo=` gives),
its type and its default (the section's, or `combo_default=`) come from the declaration. `combo_parameters` lists
them; `sections_of` turns the keywords a caller gave into each section's values. The combo's signature for
mypy is the checked-in `ComboSettings` TypedDict (`scaler/config/combo_settings.py`, written by
`python -m scaler.config.reference`; a unit test checks that it matches), and for `help()` and notebooks a
runtime signature built here (`combo_signature`).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import logging
import types
import typing
from collections.abc import Mapping
from typing import Any

from scaler.config.fields import COMBO_DEFAULT, HELP, combo_name
from scaler.config.sections import ObjectStorageServerConfig, SchedulerConfig, WorkerConfig, retired_settings

logger = logging.getLogger(__name__)

#: The sections a combo starts, in the order their settings are listed.
COMBO_SECTIONS: tuple[type, ...] = (SchedulerConfig, WorkerConfig, ObjectStorageServerConfig)


@dataclasses.dataclass(frozen=True)
class ComboParameter:
    """One keyword of `SchedulerClusterCombo` and the section fields it sets."""

    name: str
    annotation: str  #: its type as Python source ("float", "str | None")
    default: Any
    help: str
    #: (section type, field name) for every section of the combo that has the setting
    targets: tuple[tuple[type, str], ...]


def combo_parameters() -> dict[str, ComboParameter]:
    """Every keyword the declarations give the combo, in declaration order. A keyword two sections declare (the
    logging settings, `event_loop`) must have one type and one default in both; ValueError otherwise."""
    found: dict[str, ComboParameter] = {}
    for section_type in COMBO_SECTIONS:
        hints = typing.get_type_hints(section_type)
        for field in dataclasses.fields(section_type):
            name = combo_name(field)
            if name is None:
                continue
            default = field.metadata.get(COMBO_DEFAULT, field.default)
            parameter = ComboParameter(
                name, type_source(hints[field.name]), default, str(field.metadata[HELP]), ((section_type, field.name),)
            )
            previous = found.get(name)
            if previous is None:
                found[name] = parameter
                continue
            if (previous.annotation, previous.default) != (parameter.annotation, parameter.default):
                where = f"{previous.targets[0][0].__name__}.{previous.targets[0][1]}"
                raise ValueError(
                    f"SchedulerClusterCombo's {name} is declared twice with different types or defaults: {where} "
                    f"and {section_type.__name__}.{field.name}"
                )
            found[name] = dataclasses.replace(previous, targets=(*previous.targets, *parameter.targets))
    return found


def sections_of(given: Mapping[str, Any]) -> dict[type, dict[str, Any]]:
    """{section type: {field: value}} for every declared keyword, given or defaulted. An unknown keyword raises
    TypeError as Python does for a function, with the closest known one."""
    parameters = combo_parameters()
    retired = {setting.name: setting for kind in COMBO_SECTIONS for setting in retired_settings(kind) if setting.combo}
    for name in sorted(set(given) & set(retired)):
        logger.warning("SchedulerClusterCombo(%s=...) is accepted for compatibility and ignored: %s", name,
                       retired[name].why)  # fmt: skip
    unknown = sorted(set(given) - set(parameters) - set(retired))
    if unknown:
        close = difflib.get_close_matches(unknown[0], parameters, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"SchedulerClusterCombo() got an unexpected keyword argument {unknown[0]!r}{hint}")
    values: dict[type, dict[str, Any]] = {section_type: {} for section_type in COMBO_SECTIONS}
    for name, parameter in parameters.items():
        value = given.get(name, parameter.default)
        if isinstance(value, list):  # logging_paths=[...] as well as a tuple
            value = tuple(value)
        for section_type, field_name in parameter.targets:
            values[section_type][field_name] = value
    return values


def combo_signature(init: Any) -> inspect.Signature:
    """`init`'s signature (the combo's own arguments, then `**settings`) with `**settings` spelled out as the
    declared keywords: what `help(SchedulerClusterCombo)` and a notebook's completion show."""
    own = [p for p in inspect.signature(init).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    declared = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=parameter.default, annotation=parameter.annotation
        )
        for name, parameter in combo_parameters().items()
    ]
    return inspect.Signature([*own, *declared], return_annotation=None)


def type_source(hint: Any) -> str:
    """A settings field's type as Python source."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " | ".join(type_source(argument) for argument in typing.get_args(hint))
    if hint is type(None):
        return "None"
    if typing.get_origin(hint) is tuple:
        return "tuple[" + ", ".join("..." if a is Ellipsis else type_source(a) for a in typing.get_args(hint)) + "]"
    return str(hint.__name__)
