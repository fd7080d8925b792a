"""The settings' defaults as the documentation writes them, so that a page never states a number by hand.

A page writes `{{ default.SECTION.KEY }}` (`{{ default.scheduler.client_resume_seconds }}`): the default of setting KEY
of the TOML section SECTION (a command's, `scheduler`, `worker`, ...; a worker manager type's, `baremetal_native`,
...; `scaler FILE`'s `scaler` and `security`), as `-h` and the settings page write it (`1800`, `1MiB`, `none`). The
documentation site fills it (MyST's substitutions, docs/conf.py) and so does `scaler --docs` (`fill`); a name that
is no setting fails both (the site's build, and tests/unit/test_docs_site.py).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from scaler.config.cli import show_default
from scaler.config.commands import COMMANDS, LAUNCHER_TABLES
from scaler.config.manager_types import MANAGER_TYPES

#: `{{ default.SECTION.KEY }}` with the spaces MyST allows.
PLACEHOLDER = re.compile(r"\{\{\s*default\.([a-z0-9_]+)\.([a-z0-9_]+)\s*\}\}")


def sections() -> dict[str, type]:
    """Every settings section by its TOML name."""
    found: dict[str, type] = {}
    for command in COMMANDS.values():
        for name in command.toml_sections:
            found[name] = command.section
    for row in MANAGER_TYPES.values():
        found[row.name] = row.section
    found.update(LAUNCHER_TABLES)
    return found


def defaults() -> dict[str, dict[str, str]]:
    """The default of every setting that has one, written as `-h` writes it, by section and key."""
    table: dict[str, dict[str, str]] = {}
    for name, section in sections().items():
        table[name] = {
            field.name: show_default(field, field.default)
            for field in dataclasses.fields(section)
            if field.default is not dataclasses.MISSING
        }
    return table


def substitutions() -> dict[str, Any]:
    """MyST's substitutions for the site: `default` -> section -> key -> the default."""
    return {"default": defaults()}


def fill(text: str) -> str:
    """`text` with every `{{ default.SECTION.KEY }}` replaced by that default; KeyError naming an unknown one."""
    table = defaults()

    def value(match: re.Match[str]) -> str:
        section, key = match.groups()
        if key not in table.get(section, {}):
            raise KeyError(f"{{{{ default.{section}.{key} }}}} names no setting with a default")
        return table[section][key]

    return PLACEHOLDER.sub(value, text)
