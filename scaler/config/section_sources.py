"""One section from its sources: the command line, the environment, a TOML section and the section's defaults.

Each setting takes its value from the strongest source that gives one:

1. the command line: only what the user typed;
2. `SCALER_<SECTION>_<FIELD>`, e.g. SCALER_SCHEDULER_WORKER_TIMEOUT_SECONDS (section = the command's TOML table, or
   the worker manager type: SCALER_AWS_HPC_JOB_QUEUE);
3. `SCALER_<FIELD>`, e.g. SCALER_LOGGING_LEVEL, for every command that has the setting;
4. the command's section of the `-c/--config` TOML file (`scaler.config.toml_file`);
5. the dataclass default (checked like a given value: `0` for a float setting is `0.0`).

Variable names are not case-sensitive; a list setting's variable holds one value or a JSON array. The value is then
checked and typed by the field's rule (`scaler.config.setting_values`). Every problem becomes a line of one
`ConfigError` naming the setting, where its value came from and what is allowed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from scaler.config.byte_size import ACCEPTED_FORMS
from scaler.config.cli import flag_label
from scaler.config.fields import POSITIONAL
from scaler.config.setting_values import InvalidValue, SettingRule, setting_rules
from scaler.config.toml_file import ConfigError, TomlSection, toml_repr

T = TypeVar("T")

#: a value as given: (where, for messages; the value as the user wrote it; the value to check)
_Given = tuple[str, Any, Any]


def section_from_sources(
    section_type: type[T],
    *,
    cli_values: Mapping[str, Any] | None = None,
    toml: TomlSection | None = None,
    env_section: str | None = None,
    section_label: str | None = None,
) -> T:
    """Check command-line values (as typed), the environment and a TOML section into `section_type`.
    Raises ConfigError. `section_label` names the TOML section in "missing setting" messages."""
    rules = setting_rules(section_type)
    cli_values = dict(cli_values or {})
    prefixes = env_prefixes(env_section)
    environment = _environment(rules, prefixes)
    explain = _Explainer(prefixes, toml, section_label)
    values: dict[str, Any] = {}
    problems: list[str] = []
    for rule in rules:
        given = _strongest(rule, cli_values, environment, toml)
        if given is None:
            problems.append(explain.missing(rule))
            continue
        where, shown, value = given
        try:
            values[rule.name] = rule.value(value)
        except InvalidValue as invalid:  # one line for each bad part (each bad item of a list)
            problems.extend([_bad_value(rule, where, shown)] * invalid.count)
    known = {rule.name for rule in rules}
    problems.extend(f"{name}: Extra inputs are not permitted" for name in cli_values if name not in known)
    if problems:
        raise ConfigError("\n".join(problems))
    return section_type(**values)


def env_prefixes(env_section: str | None) -> tuple[str, ...]:
    """The prefixes of a section's environment variables, strongest first."""
    if env_section is None:
        return ("SCALER_",)
    return (f"SCALER_{env_section.upper()}_", "SCALER_")


def _strongest(
    rule: SettingRule,
    cli_values: Mapping[str, Any],
    environment: Sequence[Mapping[str, _Given]],
    toml: TomlSection | None,
) -> _Given | None:
    name = rule.name
    if name in cli_values:
        return flag_label(rule.field), cli_values[name], cli_values[name]
    for variables in environment:
        if name in variables:
            return variables[name]
    if toml is not None and name in toml.values:
        return toml.where(name), toml.values[name], toml.values[name]
    if not rule.required:
        return f"{name} (default)", rule.field.default, rule.field.default
    return None


def _environment(rules: Sequence[SettingRule], prefixes: Sequence[str]) -> list[dict[str, _Given]]:
    """For each prefix, strongest first: {field: given} of the variables set. A list setting's value that starts
    with `[` is a JSON array; one that does not parse is refused, whichever source gives the setting."""
    variables = {name.lower(): value for name, value in os.environ.items()}
    found: list[dict[str, _Given]] = []
    for prefix in prefixes:
        given: dict[str, _Given] = {}
        for rule in rules:
            text = variables.get(f"{prefix}{rule.name}".lower())
            if text is None:
                continue
            variable = f"{prefix}{rule.name}".upper()
            given[rule.name] = (variable, text, _list_value(variable, text) if rule.kind is tuple else text)
        found.append(given)
    return found


def _list_value(variable: str, text: str) -> Any:
    if not text.lstrip().startswith("["):
        return text
    try:
        return json.loads(text)
    except ValueError as error:
        raise ConfigError(f"{variable} is not a valid JSON array ({error}); give one value or a JSON array") from None


class _Explainer:
    """The line that says where a missing setting can be given."""

    def __init__(self, prefixes: Sequence[str], toml: TomlSection | None, section_label: str | None) -> None:
        self._prefixes = prefixes
        self._toml = toml
        self._section_label = section_label

    def missing(self, rule: SettingRule) -> str:
        name = rule.name
        positional = rule.field.metadata.get(POSITIONAL)
        ways = [f"as the positional argument {name}" if positional else f"as {flag_label(rule.field)}"]
        if self._toml is not None:
            ways.append(f"as {name} in {self._toml.label} of {self._toml.path}")
            if name == "scheduler_address":
                ways.append(f"by a [scheduler] section in {self._toml.path} (its address is taken)")
        elif self._section_label is not None:  # a table "[scheduler]", or an entry '[[worker_manager]] entry with ...'
            label = self._section_label
            where = f"the {label}" if "entry" in label else f"the {label} section"
            ways.append(f"as {name} in {where} of a -c/--config file")
        ways.append(f"as {self._prefixes[0]}{name.upper()}")
        return f"missing setting {name}: give it {', '.join(ways[:-1])}, or {ways[-1]}"


def _bad_value(rule: SettingRule, where: str, shown: Any) -> str:
    return f"bad value {toml_repr(shown)} for {where}: expected {_expectation(rule)}"


def _expectation(rule: SettingRule) -> str:
    if rule.choices is not None:
        return f"one of {', '.join(rule.choices)}"
    if rule.byte_size:
        kind = "a byte size"
    else:  # a list setting is described by its items
        kind = {bool: "a boolean (true or false)", int: "an integer", float: "a number"}.get(rule.kind, "a string")
    if rule.gt is not None:
        kind += f" > {rule.gt:g}"
    if rule.ge is not None:
        kind += f" >= {rule.ge:g}"
    return f"{kind}: {ACCEPTED_FORMS}" if rule.byte_size else kind
