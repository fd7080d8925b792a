"""The generated parser: only typed values, spellings, conflicts found at build time; and import hygiene."""

from __future__ import annotations

import argparse
import ast
import importlib
import re
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
    assert "unknown flag --cou (did you mean -n/--count?)" in refused(capsys, "--cou", "3")


def refused(capsys: pytest.CaptureFixture[str], *argv: str, section_type: type = Sample, prog: str = "sample") -> str:
    """The one error line of a refused command line (exit code 2)."""
    with pytest.raises(SystemExit) as exited:
        build_parser(section_type, prog).parse_args(argv)
    assert exited.value.code == 2
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    return line


def test_an_unknown_flag_is_named_with_the_flag_meant(capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped flag is named, with the closest flag the command takes, and not with the value argparse then gave
    the positional argument (`--num-worker 4 tcp://...` once said "unrecognized arguments: --num-worker
    tcp://..."); a hidden setting is not suggested."""
    address = "tcp://127.0.0.1:8516"
    line = refused(capsys, "--num-worker", "4", address, section_type=ClusterConfig, prog="scaler_cluster")
    assert line == (
        "scaler_cluster: error: unknown flag --num-worker (did you mean -n/--num-of-workers?) "
        "(`scaler_cluster -h` lists the flags it takes)"
    )
    # issue 60: `--workers 2` suggested --worker-type (the closest spelling); the flag whose words end so is meant
    assert "unknown flag --workers (did you mean -n/--num-of-workers?)" in refused(
        capsys, "--workers", "2", address, section_type=ClusterConfig, prog="scaler_cluster"
    )
    assert "unknown flag --death-timeout (did you mean -dts/--death-timeout-seconds?)" in refused(
        capsys, "-n", "2", "--death-timeout", "30", section_type=ClusterConfig, prog="scaler_cluster"
    )
    assert "unknown flag --policy_content: flags are spelled with hyphens, --policy-content" in refused(
        capsys, "tcp://127.0.0.1:8516", "--policy_content=x", section_type=SchedulerConfig, prog="scaler_scheduler"
    )
    assert "did you mean" not in refused(capsys, "--secrets", "y")
    assert "unknown flag --colour (" in refused(capsys, "--colour", "red")
    assert "unrecognized arguments: b (`sample -h`" in refused(capsys, "a", "b")
    assert parse("-n", "-1") == {"count": "-1"}  # a negative number is a value, not a flag


@pytest.mark.parametrize(
    ("flag", "instead"),
    [("-ap", "-pc/--policy-content"), ("-scs", "scaling="), ("-awu", "connect to the scheduler themselves"),
     ("-qs", "-wtqs/--per-worker-task-queue-size"), ("-wn", "--worker-type"), ("-la", "-lp/--logging-paths")],
)  # fmt: skip
def test_a_flag_of_an_earlier_release_says_what_replaced_it(
    capsys: pytest.CaptureFixture[str], flag: str, instead: str
) -> None:
    """docs/configuration.md, "Not supported": the 1.x flags this version does not take are refused naming what to
    give instead (they were refused with argparse's bare "unrecognized arguments")."""
    line = refused(capsys, "tcp://127.0.0.1:8516", flag, "x", section_type=SchedulerConfig, prog="scaler_scheduler")
    assert f"unknown flag {flag}: " in line and instead in line


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


@pytest.mark.parametrize(
    "section_type",
    [SchedulerConfig, ObjectStorageServerConfig, ClusterConfig, TopConfig, GUIConfig,
     *(row.section for row in MANAGER_TYPES.values())],
)  # fmt: skip
def test_a_help_text_that_states_its_default_gets_no_second_one(section_type: type) -> None:
    """issue 60: `--insecure`, `--scheduler-address` and `-wmi` read "(default: secure, ...) (default: false)": a help
    text that says its default was given the generated note as well when the default was not None."""
    helps = [action.help or "" for action in build_parser(section_type, "x")._actions]
    noted = [(text, re.sub(r" \(default: [^)]*\)$", "", text)) for text in helps]
    assert [text for text, said in noted if said != text and "default" in said] == []


def test_runtime_config_modules_do_not_import_pydantic() -> None:
    """Runtime processes import sections, fields, logging_setup (the launcher toml_file and commands, the combo
    combo): none may pull in pydantic, directly or through another scaler.config module."""
    package = Path(scaler.config.__path__[0])
    light = {
        "fields",
        "sections",
        "manager_sections",
        "manager_types",
        "logging_setup",
        "toml_file",
        "commands",
        "combo",
    }
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


def test_the_launcher_names_an_unknown_flag_too(capsys: pytest.CaptureFixture[str]) -> None:
    from scaler.entry_points.launcher import main

    with pytest.raises(SystemExit) as exited:
        main(["stack.toml", "--idle-shutdown-secs", "60"])
    assert exited.value.code == 2
    assert "scaler: error: unknown flag --idle-shutdown-secs (did you mean --idle-shutdown-seconds?)" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "module",
    ["scaler.entry_points.launcher", "scaler_rehearsal.entry_points.fake_cloud", "scaler.entry_points.keygen",
     "scaler_rehearsal.entry_points.link", "scaler.entry_points.simulate_policy"],
)  # fmt: skip
def test_every_command_takes_a_flag_only_as_written_in_full(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    """argparse completes an abbreviation by default (`scaler --exa` printed the example list): a flag added later
    would make it ambiguous, and the component commands refused it already. Checked with allow_abbrev left to
    argparse: `--vers` prints the version, exit 0, and this fails."""
    command = importlib.import_module(module)
    # the fake cloud's main first enables faulthandler, which needs a real stderr: its parser, as main builds it
    main = command._parser().parse_args if module.endswith(".fake_cloud") else command.main
    with pytest.raises(SystemExit) as exited:
        main(["--vers"] if not module.endswith(".keygen") else ["keys", "alice", "--vers"])
    assert exited.value.code == 2
    assert "--vers" in capsys.readouterr().err
