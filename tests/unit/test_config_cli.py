"""The generated parser: only typed values, spellings, conflicts found at build time; and import hygiene."""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import scaler.config
from scaler.config.cli import build_parser
from scaler.config.fields import setting
from scaler.config.manager_types import MANAGER_TYPES
from scaler.config.sections import (
    ClusterConfig,
    GUIConfig,
    ObjectStorageServerConfig,
    SchedulerConfig,
    TopConfig,
)


@dataclass(frozen=True, kw_only=True)
class Sample:
    address: str = setting(help="where", positional=True)
    count: int = setting(1, help="how many", short=("-n",), aliases=("number",))
    names: tuple[str, ...] = setting(("a",), help="names", short=("-nm",))
    is_quiet: bool = setting(False, help="quiet", short=("-q",))
    secret: str = setting("x", help="not listed", hidden=True)


def parse(*argv: str) -> dict[str, object]:
    return vars(build_parser(Sample, "sample").parse_args(argv))


def test_only_typed_values_are_collected() -> None:
    assert parse() == {}
    assert parse("-n", "3") == {"count": "3"}  # strings: validation happens in the loader, for every source alike


def test_spellings_positional_lists_and_booleans() -> None:
    assert parse("addr", "--number", "4", "-nm", "x", "y", "-q") == {
        "address": "addr",
        "count": "4",
        "names": ["x", "y"],
        "is_quiet": True,
    }
    assert parse("--is-quiet=off", "--secret", "s") == {"is_quiet": "off", "secret": "s"}


def test_abbreviations_are_not_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--cou", "3")
    assert "unrecognized arguments" in capsys.readouterr().err


def test_hidden_settings_are_accepted_but_not_listed() -> None:
    assert "--secret" not in build_parser(Sample, "sample").format_help()


def test_two_settings_claiming_one_spelling_fail_at_build_time() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Clash:
        name: str = setting("", help="a", short=("-n",))
        number: int = setting(0, help="b", short=("-n",))

    with pytest.raises(ValueError, match="-n is claimed by both name and number"):
        build_parser(Clash, "clash")

    @dataclass(frozen=True, kw_only=True)
    class ClashWithConfig:
        colour: str = setting("", help="a", short=("-c",))

    with pytest.raises(ValueError, match="-c is claimed"):
        build_parser(ClashWithConfig, "clash")


@pytest.mark.parametrize(
    "section_type",
    [
        SchedulerConfig,
        ObjectStorageServerConfig,
        ClusterConfig,
        TopConfig,
        GUIConfig,
        *(row.section for row in MANAGER_TYPES.values()),
    ],
)
def test_every_section_builds_a_parser(section_type: type) -> None:
    assert isinstance(build_parser(section_type, "x"), argparse.ArgumentParser)


def test_runtime_config_modules_do_not_import_pydantic() -> None:
    """Runtime processes import sections, fields, logging_setup (the launcher toml_file and commands, the combo
    combo): none may pull in pydantic, directly or through another scaler.config module."""
    package = Path(scaler.config.__path__[0])
    light = {"fields", "sections", "manager_types", "logging_setup", "toml_file", "commands", "combo"}
    for name in light:
        tree = ast.parse((package / f"{name}.py").read_text())
        for node in ast.walk(tree):
            modules = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for module in modules:
                assert not module.startswith("pydantic"), f"{name}.py imports {module}"
                if module.startswith("scaler.config."):
                    assert module.rsplit(".", 1)[-1] in light, f"{name}.py imports {module}"
