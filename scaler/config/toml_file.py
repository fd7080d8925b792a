"""Reading one component's section of a TOML file: which table, which keys, and the 1.x compatibility keys.

Stdlib only, so that the `scaler FILE` launcher can use it cheaply. Values are returned as
TOML gave them; `scaler.config.loader` validates them. Every problem raises `ConfigError` with a message that
names the file, the section and the key.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scaler.config.commands import known_tables
from scaler.config.fields import ALIASES
from scaler.config.sections import GUIConfig, SchedulerConfig, retired_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class ConfigError(Exception):
    """A configuration the user must fix. The message is complete: it says what is wrong and where."""


_ERROR_LINE = re.compile(r"\(at line (\d+), column \d+\)$")
#: A value TOML reads without quotes: a number, a boolean, a date, an array, an inline table, a string.
_BARE_VALUE = re.compile(r"""^(?:[-+]?[\d.]|true\b|false\b|inf\b|nan\b|\[|\{|"|')""")


def _syntax_hint(path: str, message: str) -> str:
    """For a TOML syntax error: the line it is on, and, for a string written without quotes (`bind_address =
    tcp://127.0.0.1:8516`, as on a command line), how to write it."""
    at = _ERROR_LINE.search(message)
    if at is None:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return ""
    number = int(at.group(1))
    if not 0 < number <= len(lines):
        return ""
    line = lines[number - 1].strip()
    hint = f": {line}"
    key, equals, value = line.partition("=")
    value = value.strip()
    if equals and message.startswith("Invalid value") and value and not _BARE_VALUE.match(value):
        hint += f'; a string is written in quotes: {key.strip()} = "{value}"'
    return hint


def read_toml_file(path: str) -> dict[str, Any]:
    """The whole document. A missing or unreadable file, a syntax error (with line and column) and a table no
    command reads (with its line and the closest known name) raise."""
    try:
        with open(path, "rb") as file:
            document: dict[str, Any] = tomllib.load(file)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found") from None
    except tomllib.TOMLDecodeError as error:
        # tomllib's message ends with "(at line L, column C)".
        raise ConfigError(f"config file {path} is not valid TOML: {error}{_syntax_hint(path, str(error))}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from None
    _check_sections(document, path)
    return document


def _check_sections(document: Mapping[str, Any], path: str) -> None:
    """A file may hold the sections of several components (the seeds' unified file), each a table some command or the
    launcher reads (`commands.known_tables`); any other table is a mistake (a misspelt `[schedular]` would otherwise
    be ignored)."""
    known_sections = known_tables()
    for name, value in document.items():
        if name in known_sections:
            continue
        line = _line_of(path, name)
        where = f"{path}, line {line}" if line else path
        if not isinstance(value, (dict, list)):
            raise ConfigError(f"{where}: {name} = ... is outside any section; put it under the component's section")
        close = difflib.get_close_matches(name, sorted(known_sections), n=1)
        hint = f"; did you mean [{close[0]}]?" if close else ""
        known = (
            ", ".join(f"[{known}]" for known in sorted(known_sections - {"worker_manager"})) + ", [[worker_manager]]"
        )
        raise ConfigError(f"{where}: unknown section [{name}]{hint} (sections: {known})")


def _line_of(path: str, name: str) -> int | None:
    """The line that opens table `name` (or sets key `name` at the top), for messages."""
    pattern = re.compile(rf"^\s*(\[\[?\s*{re.escape(name)}\s*[\].]|{re.escape(name)}\s*=)")
    try:
        with open(path, encoding="utf-8") as file:
            for number, text in enumerate(file, start=1):
                if pattern.match(text):
                    return number
    except OSError:
        return None
    return None


_SPEC_PATTERN = re.compile(r"^(?P<table>\w+)(?:\[(?P<key>\w+)=(?P<value>[\w.-]+)\])?$")


@dataclasses.dataclass(frozen=True)
class SectionSpec:
    """Where a command looks in the file: a table `name`, or the entry of the array of tables `name` whose
    `key` equals `value` (written "worker_manager[type=aws_hpc]")."""

    table: str
    selector: tuple[str, str] | None = None

    @classmethod
    def parse(cls, spec: str) -> SectionSpec:
        match = _SPEC_PATTERN.match(spec)
        if match is None:
            raise ValueError(f"bad TOML section spec {spec!r}: expected 'name' or 'name[key=value]'")
        if match["key"] is None:
            return cls(match["table"])
        return cls(match["table"], (match["key"], match["value"]))

    @property
    def label(self) -> str:
        if self.selector is None:
            return f"[{self.table}]"
        key, value = self.selector
        return f'[[{self.table}]] entry with {key} = "{value}"'


@dataclasses.dataclass(frozen=True)
class TomlSection:
    """One section of a file, with its keys already turned into field names."""

    path: str
    label: str
    #: field name -> the value as written in the file (after the compatibility translations).
    values: Mapping[str, Any]
    #: field name -> the key the user wrote ("max-task-concurrency", "scheduler_address", "policy.policy_content").
    keys: Mapping[str, str]
    #: one-line notes about 1.x keys that were translated, for the command to print on stderr.
    notices: tuple[str, ...] = ()

    def where(self, field_name: str) -> str:
        """`key in [section] of file` for messages."""
        return f"{self.keys.get(field_name, field_name)} in {self.label} of {self.path}"


def find_table(
    document: Mapping[str, Any], path: str, specs: Sequence[SectionSpec]
) -> tuple[SectionSpec, Mapping[str, Any]] | None:
    """The first spec, in preference order, that the document has. Several array entries matching one spec
    is an error (a worker manager command can only be one of them)."""
    for spec in specs:
        content = document.get(spec.table)
        if content is None:
            continue
        if spec.selector is None:
            if not isinstance(content, dict):
                raise ConfigError(f"{path}: {spec.label} must be a table, not {toml_repr(content)}")
            return spec, content
        entries = content if isinstance(content, list) else [content]
        if not all(isinstance(entry, dict) for entry in entries):
            raise ConfigError(f"{path}: [[{spec.table}]] must be an array of tables (or one table)")
        key, wanted = spec.selector
        matches = [entry for entry in entries if entry.get(key) == wanted]
        if len(matches) > 1:
            raise ConfigError(
                f'{path}: {len(matches)} [[{spec.table}]] entries have {key} = "{wanted}"; this command reads '
                f"exactly one (use one file per manager, or the `scaler` launcher, which starts every entry)"
            )
        if matches:
            return spec, matches[0]
    return None


def read_section(section_type: type, path: str, specs: Sequence[SectionSpec]) -> TomlSection:
    """The command's section of the file at `path`. A file without it is an error: the user asked for it."""
    document = read_toml_file(path)
    found = find_table(document, path, specs)
    if found is None:
        raise ConfigError(_no_section_message(document, path, specs))
    spec, table = found
    return section_from_table(section_type, table, path=path, label=spec.label, skip_keys=_selector_keys(spec))


def section_from_table(
    section_type: type, table: Mapping[str, Any], *, path: str, label: str, skip_keys: Sequence[str] = ()
) -> TomlSection:
    """Map the keys of one table onto the fields of `section_type`.

    A key is a field name, with `-` or `_`, or one of the field's `aliases`. Two known sub-tables of the
    reference's launcher format are flattened (`[x.policy]`, `[x.logging_config]`). 1.x keys whose meaning
    changed go through a translation (`allocate_policy`, `web_host`/`web_port`); retired keys (`network_backend`:
    `sections.RETIRED_SETTINGS`) are checked, noted and dropped. Anything else is refused.
    """
    spellings = toml_spellings(section_type)
    compat_keys, translate = _COMPAT.get(section_type, (frozenset(), None))
    retired = {setting.name: setting for setting in retired_settings(section_type)}
    values: dict[str, Any] = {}
    keys: dict[str, str] = {}
    legacy: dict[str, tuple[str, Any]] = {}
    notices: list[str] = []
    for key, normalized, value in _flatten(table, spellings):
        if key in skip_keys:
            continue
        if normalized in compat_keys:
            legacy[normalized] = (key, value)
            continue
        if normalized in retired:
            problem = retired[normalized].problem(value)
            if problem is not None:
                raise ConfigError(f"bad value {toml_repr(value)} for {key} in {label} of {path}; {problem}")
            notices.append(
                f"note: {key} = {toml_repr(value)} in {label} of {path} is accepted for compatibility and "
                f"ignored: {retired[normalized].why}"
            )
            continue
        field_name = spellings.get(normalized)
        if field_name is None:
            raise ConfigError(_unknown_key_message(key, normalized, spellings, compat_keys, path, label))
        if field_name in values:
            raise ConfigError(
                f"{path}: {label} sets {field_name} twice (as {keys[field_name]} and as {key}); keep one of them"
            )
        values[field_name] = value
        keys[field_name] = key
    if legacy and translate is not None:
        notices.extend(translate(values, keys, legacy, f"{label} of {path}"))
    return TomlSection(path=path, label=label, values=values, keys=keys, notices=tuple(notices))


def toml_spellings(section_type: type) -> dict[str, str]:
    """Every accepted key (hyphens already turned into underscores) -> field name."""
    spellings: dict[str, str] = {}
    for field in dataclasses.fields(section_type):
        spellings[field.name] = field.name
        for alias in field.metadata.get(ALIASES, ()):
            spellings[alias.replace("-", "_")] = field.name
    return spellings


# Sub-tables of the reference's `scaler FILE` format (its sections nest `policy` and `logging_config`
# dataclasses): sub-table -> {key inside it -> our field}.
_SUBTABLES: dict[str, dict[str, str]] = {
    "policy": {"policy_engine_type": "policy_engine_type", "policy_content": "policy_content"},
    "logging_config": {"paths": "logging_paths", "level": "logging_level", "config_file": "logging_config_file"},
}


def _flatten(table: Mapping[str, Any], spellings: Mapping[str, str]) -> list[tuple[str, str, Any]]:
    """(key as written, key to look up, value) for each key, sub-tables of `_SUBTABLES` flattened."""
    items: list[tuple[str, str, Any]] = []
    for key, value in table.items():
        normalized = key.replace("-", "_")
        renames = _SUBTABLES.get(normalized)
        if renames is None or not isinstance(value, dict) or normalized in spellings:
            items.append((key, normalized, value))
            continue
        for inner_key, inner_value in value.items():
            inner = inner_key.replace("-", "_")
            items.append((f"{key}.{inner_key}", renames.get(inner, inner), inner_value))
    return items


def _selector_keys(spec: SectionSpec) -> tuple[str, ...]:
    return () if spec.selector is None else (spec.selector[0],)


def _no_section_message(document: Mapping[str, Any], path: str, specs: Sequence[SectionSpec]) -> str:
    wanted = " or ".join(spec.label for spec in specs)
    tables = [key for key, value in document.items() if isinstance(value, (dict, list))]
    message = f"{path} has no {wanted} for this command"
    for spec in specs:
        entries = document.get(spec.table)
        if spec.selector is not None and isinstance(entries, list):
            key = spec.selector[0]
            found = ", ".join(toml_repr(entry.get(key)) for entry in entries if isinstance(entry, dict))
            message += f" (0 of its {len(entries)} [[{spec.table}]] entries match; their {key}s: {found})"
    if tables:
        message += f"; its sections: {', '.join(f'[{table}]' for table in tables)}"
    return message


def _unknown_key_message(
    key: str, normalized: str, spellings: Mapping[str, str], compat_keys: frozenset[str], path: str, label: str
) -> str:
    candidates = sorted(set(spellings) | compat_keys)
    close = difflib.get_close_matches(normalized, candidates, n=1)
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    allowed = ", ".join(sorted(set(spellings.values())))
    return f'{path}: unknown key "{key}" in {label}{hint}; allowed keys: {allowed}'


def toml_repr(value: Any) -> str:
    """A value the way it is written in TOML, for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_repr(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {toml_repr(item)}" for key, item in value.items()) + "}"
    return str(value)


# --- 1.x keys whose meaning changed -------------------------------------------------------------------------

#: (the values of one table, the keys as written, the 1.x items found {key: (as written, value)}, where) -> notes
_Translator = Callable[[dict[str, Any], dict[str, str], dict[str, tuple[str, Any]], str], list[str]]

#: `allocate_policy` (1.12 `-ap`): AllocatePolicy names -> the `allocate=` item of policy_content.
_ALLOCATE_POLICIES = {"even": "even_load", "even_load": "even_load", "capability": "capability"}


def _translate_allocate_policy(
    values: dict[str, Any], keys: dict[str, str], legacy: dict[str, tuple[str, Any]], where: str
) -> list[str]:
    """`allocate_policy = "even"` -> policy_content with `allocate=even_load` and the default scaling item."""
    key, value = legacy["allocate_policy"]
    allocate = _ALLOCATE_POLICIES.get(value.lower()) if isinstance(value, str) else None
    if allocate is None:
        raise ConfigError(f"bad value {toml_repr(value)} for {key} in {where}; allowed: even, capability")
    if "policy_content" in values:
        raise ConfigError(f"{where} sets both {key} (1.x) and {keys['policy_content']}; keep only policy_content")
    if values.get("policy_engine_type", "simple") != "simple":
        raise ConfigError(f'{key} in {where} only applies to policy_engine_type = "simple"; use policy_content')
    default_items = [item.strip() for item in _default(SchedulerConfig, "policy_content").split(";")]
    items = [f"allocate={allocate}" if item.startswith("allocate=") else item for item in default_items]
    content = "; ".join(items)
    values["policy_content"] = content
    keys["policy_content"] = key
    return [f'note: {key} = {toml_repr(value)} in {where} is a 1.x key, read as policy_content = "{content}"']


def _translate_web_address(
    values: dict[str, Any], keys: dict[str, str], legacy: dict[str, tuple[str, Any]], where: str
) -> list[str]:
    """1.x `scaler_ui` `web_host` / `web_port` -> gui_address "host:port" (the missing half from the default)."""
    if "gui_address" in values:
        written = " and ".join(key for key, _ in legacy.values())
        raise ConfigError(f"{where} sets both {written} (1.x) and {keys['gui_address']}; keep only gui_address")
    default_host, _, default_port = _default(GUIConfig, "gui_address").rpartition(":")
    host_key, host = legacy.get("web_host", ("web_host", default_host))
    port_key, port = legacy.get("web_port", ("web_port", default_port))
    if not isinstance(host, str) or not host:
        raise ConfigError(f"bad value {toml_repr(host)} for {host_key} in {where}; expected a host name or IP")
    if isinstance(port, bool) or not str(port).isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"bad value {toml_repr(port)} for {port_key} in {where}; expected a port 1-65535")
    values["gui_address"] = f"{host}:{int(port)}"
    keys["gui_address"] = "/".join(key for key, _ in legacy.values())
    return []


def _default(section_type: type, field_name: str) -> str:
    default = next(field.default for field in dataclasses.fields(section_type) if field.name == field_name)
    assert isinstance(default, str)
    return default


_COMPAT: dict[type, tuple[frozenset[str], _Translator]] = {
    SchedulerConfig: (frozenset({"allocate_policy"}), _translate_allocate_policy),
    GUIConfig: (frozenset({"web_host", "web_port"}), _translate_web_address),
}
