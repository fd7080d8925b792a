"""The settings' defaults as the documentation writes them, so that a page never states a number by hand.

A page writes `{{ default.SECTION.KEY }}` in its text (not in code: Markdown keeps code as written): the default of
setting KEY of the TOML section SECTION (a command's, `scheduler`, `worker`, ...; a worker manager type's,
`baremetal_native`, ...; `scaler FILE`'s `scaler` and `security`), as the settings page writes it: as code (`1800`,
`1MiB`, `none`), or in words for a default computed on the machine ("CPU count"). The documentation site fills it
(MyST's substitutions, docs/conf.py) and so does `scaler --docs` (`fill`); a name that is no setting fails both (the
site's build, and tests/unit/test_docs_site.py).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from scaler.config.cli import show_default
from scaler.config.commands import COMMANDS, LAUNCHER_TABLES
from scaler.config.fields import SHOWN_DEFAULT
from scaler.config.manager_types import MANAGER_TYPES

#: `{{ default.SECTION.KEY }}` with the spaces MyST allows.
PLACEHOLDER = re.compile(r"\{\{\s*default\.([a-z0-9_]+)\.([a-z0-9_]+)\s*\}\}")
#: What Markdown keeps as written: a fenced block, or a code span (its backticks matched).
_CODE = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1[ \t]*$|(`+)(?!`).+?(?<!`)\2(?!`)", re.M | re.S)


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
    """The default of every setting that has one, as Markdown, by section and key."""
    table: dict[str, dict[str, str]] = {}
    for name, section in sections().items():
        table[name] = {field.name: _shown(field) for field in dataclasses.fields(section)
                       if field.default is not dataclasses.MISSING}  # fmt: skip
    return table


def _shown(field: dataclasses.Field[Any]) -> str:
    if SHOWN_DEFAULT in field.metadata:
        return str(field.metadata[SHOWN_DEFAULT])
    return f"`{show_default(field, field.default)}`"


def substitutions() -> dict[str, Any]:
    """MyST's substitutions for the site: `default` -> section -> key -> the default."""
    return {"default": defaults()}


def placeholders(text: str) -> list[tuple[str, str]]:
    """The (section, key) of every placeholder in the prose of a page (outside its code)."""
    return [(match[1], match[2]) for part in _prose(text) for match in PLACEHOLDER.finditer(part)]


def fill(text: str) -> str:
    """`text` with every `{{ default.SECTION.KEY }}` of its prose replaced by that default, as the site does; KeyError
    naming an unknown one."""
    table = defaults()

    def value(match: re.Match[str]) -> str:
        section, key = match.groups()
        if key not in table.get(section, {}):
            raise KeyError(f"{{{{ default.{section}.{key} }}}} names no setting with a default")
        return table[section][key]

    filled: list[str] = []
    end = 0
    for code in _CODE.finditer(text):
        filled += [PLACEHOLDER.sub(value, text[end : code.start()]), code.group(0)]
        end = code.end()
    filled.append(PLACEHOLDER.sub(value, text[end:]))
    return "".join(filled)


def _prose(text: str) -> list[str]:
    """The parts of `text` between its code."""
    parts: list[str] = []
    end = 0
    for code in _CODE.finditer(text):
        parts.append(text[end : code.start()])
        end = code.end()
    parts.append(text[end:])
    return parts
