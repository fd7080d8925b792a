"""How a setting's value is read from a flag's text, an environment variable or a TOML value: the spellings of
numbers and booleans each type takes, the ones it refuses, and what a section's values are typed as
(`scaler.config.setting_values`): what users write in their files, scripts and environments keeps its meaning.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from scaler.config.fields import setting
from scaler.config.loader import section_from_sources
from scaler.config.sections import LauncherConfig, SchedulerConfig
from scaler.config.setting_values import InvalidValue, setting_rules
from scaler.config.toml_file import ConfigError, TomlSection

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("no_scaler_environment")]

ADDRESS = "tcp://127.0.0.1:8516"


@dataclasses.dataclass(frozen=True)
class Sample:
    """One setting of each kind a section declares."""

    flag: bool = setting(False, help="a boolean")
    count: int = setting(1, help="an integer")
    ratio: float = setting(1.0, help="a number")
    name: str = setting("x", help="a text")
    paths: tuple[str, ...] = setting((), help="a list")
    limit: int | None = setting(None, help="an optional integer")
    level: str = setting("INFO", help="a choice", choices=("DEBUG", "INFO"))
    size: int = setting(0, help="a byte size", byte_size=True, ge=0)
    positive: float = setting(1.0, help="a positive number", gt=0)


RULES = {rule.name: rule for rule in setting_rules(Sample)}

ACCEPTED: list[tuple[str, Any, Any]] = [
    # booleans: the words in any case, 0 and 1
    ("flag", "yes", True), ("flag", "OFF", False), ("flag", "T", True), ("flag", "n", False), ("flag", "1", True),
    ("flag", 0, False), ("flag", 1.0, True), ("flag", True, True),
    # integers: signs, underscores between digits, zero decimals, whitespace around; a float with no fraction
    ("count", "42", 42), ("count", "+7", 7), ("count", "-3", -3), ("count", "1_000", 1000), ("count", "5.00", 5),
    ("count", " 8\n", 8), ("count", "\u20039\u3000", 9), ("count", "007", 7), ("count", 5.0, 5), ("count", True, 1),
    ("count", "99999999999999999999999", 99999999999999999999999),
    # numbers: decimals, exponents, inf and nan, underscores inside
    ("ratio", "2", 2.0), ("ratio", 3, 3.0), ("ratio", ".5", 0.5), ("ratio", "5.", 5.0), ("ratio", "1e3", 1000.0),
    ("ratio", "-1.5E-2", -0.015), ("ratio", "1_000.5", 1000.5), ("ratio", " 2.5 ", 2.5),
    ("ratio", "Infinity", math.inf), ("ratio", "-inf", -math.inf), ("ratio", False, 0.0),
    # text is kept as written
    ("name", " a b ", " a b "), ("name", "", ""),
    # a list: one text, or a list of texts
    ("paths", "/tmp/x.log", ("/tmp/x.log",)), ("paths", ["a", "b"], ("a", "b")), ("paths", [], ()),
    ("limit", None, None), ("limit", "12", 12),
    # a choice in any case is its declared spelling; a byte size takes a unit
    ("level", "debug", "DEBUG"), ("size", "2KiB", 2048), ("size", 4.0, 4), ("positive", "0.5", 0.5),
]  # fmt: skip

REFUSED: list[tuple[str, Any]] = [
    ("flag", "maybe"), ("flag", " yes"), ("flag", 2), ("flag", 0.5), ("flag", "2"),
    ("count", "5.5"), ("count", 5.5), ("count", "5."), ("count", "1e3"), ("count", "0x10"), ("count", "1__0"),
    ("count", "_1"), ("count", "1_"), ("count", ""), ("count", "\u0663"), ("count", "\x1c5"), ("count", math.inf),
    ("count", 2.0**63), ("count", [1]), ("count", "true"), ("count", "1" * 5000),
    ("ratio", "1,5"), ("ratio", "e5"), ("ratio", "."), ("ratio", " 1_0 "), ("ratio", "yes"), ("ratio", None),
    ("name", 8516), ("name", True), ("name", ["a"]),
    ("paths", 5), ("paths", {"a": "b"}),
    ("level", "LOUD"), ("level", 1), ("size", "4K"), ("size", -1), ("size", True),
    ("positive", "0"), ("positive", "nan"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "given", "expected"), ACCEPTED, ids=lambda value: repr(value)[:30])
def test_a_value_each_setting_takes(name: str, given: Any, expected: Any) -> None:
    value = RULES[name].value(given)
    assert type(value) is type(expected)
    assert value == expected or (isinstance(value, float) and math.isnan(value) and math.isnan(expected))


@pytest.mark.parametrize(("name", "given"), REFUSED, ids=lambda value: repr(value)[:30])
def test_a_value_each_setting_refuses(name: str, given: Any) -> None:
    with pytest.raises(InvalidValue):
        RULES[name].value(given)


def test_each_bad_item_of_a_list_is_counted() -> None:
    with pytest.raises(InvalidValue) as refused:
        RULES["paths"].value(["a", 1, None])
    assert refused.value.count == 2


def test_a_number_setting_is_a_float_whatever_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """A float setting holds a float when its default, a file or a variable writes a whole number (LauncherConfig's
    defaults are written 0): the sections are sent to the processes they configure as JSON, where 0 and 0.0 differ."""
    launcher = section_from_sources(LauncherConfig)
    assert [type(launcher.idle_shutdown_seconds), type(launcher.no_client_shutdown_seconds)] == [float, float]
    toml = TomlSection(path="f.toml", label="[scheduler]", values={"worker_timeout_seconds": 7}, keys={})
    monkeypatch.setenv("SCALER_SCHEDULER_CLIENT_TIMEOUT_SECONDS", "9")
    section = section_from_sources(
        SchedulerConfig, cli_values={"bind_address": ADDRESS}, toml=toml, env_section="scheduler"
    )
    assert (section.worker_timeout_seconds, section.client_timeout_seconds) == (7.0, 9.0)
    assert [type(section.worker_timeout_seconds), type(section.client_timeout_seconds)] == [float, float]


def test_a_bad_list_names_each_bad_item_and_a_bad_json_array_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    toml = TomlSection(path="f.toml", label="[scheduler]", values={"logging_paths": ["/dev/stdout", 1, 2]}, keys={})
    with pytest.raises(ConfigError) as refused:
        section_from_sources(SchedulerConfig, cli_values={"bind_address": ADDRESS}, toml=toml)
    line = 'bad value ["/dev/stdout", 1, 2] for logging_paths in [scheduler] of f.toml: expected a string'
    assert str(refused.value) == f"{line}\n{line}"
    monkeypatch.setenv("scaler_scheduler_logging_paths", '["/tmp/a.log", ')
    with pytest.raises(ConfigError) as refused:  # refused even where a flag gives the setting
        section_from_sources(
            SchedulerConfig, cli_values={"bind_address": ADDRESS, "logging_paths": ["x"]}, env_section="scheduler"
        )
    assert str(refused.value).startswith("SCALER_SCHEDULER_LOGGING_PATHS is not a valid JSON array (Expecting value")
    assert str(refused.value).endswith("); give one value or a JSON array")
