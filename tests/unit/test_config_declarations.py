"""Each setting is declared once (scaler/config/sections.py); what follows from the declaration follows from it.

These tests fail when a copy drifts from the declarations: a generated file not regenerated (checked by hand: a
`combo=True` added to `SchedulerConfig.metrics_address` without running `python -m scaler.config.reference`
fails `test_generated_files_are_up_to_date`), a `CoreSettings` field that no setting declares or that a
declaration misnames (checked by hand: dropping `core=` from `worker_manager_timeout_seconds` fails
`test_every_core_settings_field_is_declared_or_runtime`), or a `SchedulerClusterCombo` keyword lost.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import re
import typing
from pathlib import Path

import pytest

from scaler.cluster.combo import SchedulerClusterCombo
from scaler.config.combo import combo_parameters, sections_of
from scaler.config.commands import COMMANDS
from scaler.config.fields import core_name
from scaler.config.loader import load_launcher_file
from scaler.config.reference import REPOSITORY, generated_files, main
from scaler.config.sections import LauncherConfig, ObjectStorageServerConfig, SchedulerConfig, WorkerConfig
from scaler.entry_points.launcher import main as launcher_main
from scaler.policy.content import Allocation
from scaler.policy.registry import make_policy
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.process import RUNTIME_CORE_FIELDS, core_settings_of

#: SchedulerClusterCombo's keywords and defaults before the declarations gave them (and the reference's 2.x names):
#: none may disappear or change its default, but `policy_content`'s `allocate=` item, changed on purpose from even_load
#: to capability so that capabilities are honoured by default (docs/behaviour.md, differences from the reference).
COMBO_KEYWORDS_BEFORE = {
    "n_workers": 4, "address": None, "object_storage_address": None, "monitor_address": None,
    "per_worker_capabilities": None, "worker_io_threads": 1, "scheduler_io_threads": 1,
    "max_number_of_tasks_waiting": -1, "heartbeat_interval_seconds": 2, "client_timeout_seconds": 60,
    "worker_timeout_seconds": 60, "object_retention_seconds": 60, "story_retention_tasks": 10_000,
    "story_retention_seconds": 3600, "result_retention_seconds": 3600, "task_timeout_seconds": 0,
    "death_timeout_seconds": 300, "load_balance_seconds": 1, "load_balance_trigger_times": 2,
    "garbage_collect_interval_seconds": 30, "trim_memory_threshold_bytes": 1 << 30,
    "per_worker_task_queue_size": 1000, "hard_processor_suspend": False, "protected": True, "scaler_policy": None,
    "event_loop": "builtin", "logging_paths": ("/dev/stdout",), "logging_level": "WARNING",
    "logging_config_file": None, "worker_manager_id": "combo", "security_config": None,
    "policy_engine_type": "simple", "policy_content": "allocate=capability; scaling=no", "max_task_retries": 3,
    "preload": None, "secure": False, "insecure": False, "nested_parents": "thread", "dashboard": False,
}  # fmt: skip


def test_generated_files_are_up_to_date() -> None:
    """docs/settings.md and scaler/config/combo_settings.py are what the declarations give."""
    stale = [str(path) for path, text in generated_files().items() if path.read_text() != text]
    assert not stale, f"out of date: {stale}; run python -m scaler.config.reference"
    assert main(["--check"]) == 0


def test_the_generator_writes_nothing_into_an_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """From a wheel, configuration.md's `python -m scaler.config.reference` found no docs/ beside site-packages:
    `--check` said docs/settings.md was out of date, and without it the command would have written a docs/ folder into
    site-packages. It says to run it in a clone instead, and writes nothing."""
    from scaler.config import reference

    site_packages = tmp_path / "site-packages"
    monkeypatch.setattr(reference, "REPOSITORY", site_packages)
    monkeypatch.setattr(reference, "SETTINGS_PAGE", site_packages / "docs" / "settings.md")
    monkeypatch.setattr(reference, "COMBO_SETTINGS_MODULE", site_packages / "scaler" / "config" / "combo_settings.py")
    for arguments in (["--check"], []):
        assert reference.main(arguments) == 2
        assert "run it in a clone" in capsys.readouterr().err
    assert not site_packages.exists()


def test_every_core_settings_field_is_declared_or_runtime() -> None:
    declared = {core_name(field): field for field in dataclasses.fields(SchedulerConfig) if core_name(field)}
    core_fields = {field.name for field in dataclasses.fields(CoreSettings)}
    assert set(declared) <= core_fields, f"declared core= names CoreSettings lacks: {set(declared) - core_fields}"
    assert not set(declared) & RUNTIME_CORE_FIELDS
    assert core_fields == set(declared) | RUNTIME_CORE_FIELDS, core_fields - set(declared) - RUNTIME_CORE_FIELDS
    section_hints, core_hints = typing.get_type_hints(SchedulerConfig), typing.get_type_hints(CoreSettings)
    for name, field in declared.items():
        assert section_hints[field.name] == core_hints[name], f"{field.name} -> CoreSettings.{name}: types differ"


def test_core_settings_carry_every_declared_value() -> None:
    """Each declared setting, set to a value unlike any default, reaches its CoreSettings field."""
    values: dict[str, object] = {}
    for number, field in enumerate(dataclasses.fields(SchedulerConfig), start=7):
        if core_name(field) is None:
            continue
        values[field.name] = not field.default if isinstance(field.default, bool) else number
    config = SchedulerConfig(bind_address="tcp://127.0.0.1:1", **values)  # type: ignore[arg-type]
    policy = make_policy("simple", "allocate=capability; scaling=no")
    settings = core_settings_of(config, "tcp://127.0.0.1:1", "tcp://127.0.0.1:2", policy, instance_id=b"12345678")
    for field in dataclasses.fields(SchedulerConfig):
        name = core_name(field)
        if name is not None:
            assert getattr(settings, name) == values[field.name], f"{field.name} -> CoreSettings.{name}"
    assert settings.allocate is Allocation.CAPABILITY
    assert settings.object_storage_address == "tcp://127.0.0.1:2"


def test_the_combo_keeps_every_keyword_and_default() -> None:
    parameters = inspect.signature(SchedulerClusterCombo).parameters
    for name, default in COMBO_KEYWORDS_BEFORE.items():
        assert name in parameters, f"SchedulerClusterCombo lost {name}"
        assert parameters[name].default == default, f"{name}: {parameters[name].default!r} != {default!r}"
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def test_combo_keywords_reach_their_sections() -> None:
    sections = sections_of(
        {"scheduler_io_threads": 3, "worker_io_threads": 5, "logging_level": "DEBUG", "client_timeout_seconds": 9,
         "logging_paths": ["/tmp/x.log"]}
    )  # fmt: skip
    assert sections[SchedulerConfig]["io_threads"] == 3
    assert sections[WorkerConfig]["io_threads"] == 5
    assert {sections[kind]["logging_level"] for kind in (SchedulerConfig, WorkerConfig, ObjectStorageServerConfig)} == {
        "DEBUG"
    }
    assert sections[SchedulerConfig]["logging_paths"] == ("/tmp/x.log",)
    assert sections[SchedulerConfig]["client_timeout_seconds"] == 9
    assert "client_timeout_seconds" not in sections[WorkerConfig]
    assert sections[WorkerConfig]["worker_manager_id"] == "combo"  # the combo's own default
    SchedulerConfig(bind_address="tcp://127.0.0.1:1", **sections[SchedulerConfig])


def test_an_unknown_combo_keyword_is_named() -> None:
    with pytest.raises(
        TypeError, match=r"unexpected keyword argument 'client_timeout_secondz'.*client_timeout_seconds"
    ):
        sections_of({"client_timeout_secondz": 5})


def test_a_retired_combo_keyword_is_accepted_noted_and_dropped(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 56: `direct_results` and `lend_processors` choose no route any more (there is one); code that passes them
    still runs."""
    with caplog.at_level(logging.WARNING):
        sections = sections_of({"direct_results": True, "lend_processors": False})
    assert sections == sections_of({})
    assert "direct_results=...) is accepted for compatibility and ignored" in caplog.text
    assert "lend_processors=...) is accepted for compatibility and ignored" in caplog.text


def test_every_declared_combo_keyword_is_a_section_field() -> None:
    for name, parameter in combo_parameters().items():
        for section, field_name in parameter.targets:
            assert field_name in {field.name for field in dataclasses.fields(section)}, name


def test_the_launchers_scaler_flags_are_its_declared_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`scaler FILE --idle-shutdown-seconds 5`: the [scaler] section's declarations give the launcher's flags, and
    a flag overrides the environment, which overrides the file."""
    with pytest.raises(SystemExit):
        launcher_main(["-h"])
    usage = capsys.readouterr().out
    for field in dataclasses.fields(LauncherConfig):
        assert f"--{field.name.replace('_', '-')}" in usage
    stack = tmp_path / "stack.toml"
    stack.write_text('[scheduler]\nbind_address = "tcp://127.0.0.1:8516"\n[scaler]\nidle_shutdown_seconds = 3\n')
    assert load_launcher_file(str(stack)).launcher.idle_shutdown_seconds == 3
    monkeypatch.setenv("SCALER_SCALER_IDLE_SHUTDOWN_SECONDS", "4")
    assert load_launcher_file(str(stack)).launcher.idle_shutdown_seconds == 4
    flags = {"idle_shutdown_seconds": "5", "hub": "LOCAL"}
    assert load_launcher_file(str(stack), flags).launcher == LauncherConfig(hub="local", idle_shutdown_seconds=5)


def test_settings_md_lists_only_flags_the_launcher_takes(capsys: pytest.CaptureFixture[str]) -> None:
    """Every flag docs/settings.md gives `scaler FILE` is one of `scaler -h`'s: its [security] table once listed
    `--server-secret-key` and three more, which the launcher refused."""
    with pytest.raises(SystemExit):
        launcher_main(["-h"])
    usage = capsys.readouterr().out
    page = (REPOSITORY / "docs" / "settings.md").read_text()
    tables = [part for part in page.split("\n## ") if part.startswith("`scaler FILE`")]
    assert len(tables) == 2, "[scaler] and [security]"
    rows = [line for table in tables for line in table.splitlines() if line.startswith("| `")]
    listed = {flag for row in rows for flag in re.findall(r"`(--?[\w-]+)`", row.split(" | ")[1])}
    assert listed and not {flag for flag in listed if flag not in usage}, listed


def test_configuration_md_names_every_commands_section_and_environment() -> None:
    """docs/configuration.md's two tables of commands say what `commands.COMMANDS` says."""
    page = (REPOSITORY / "docs" / "configuration.md").read_text()
    for command in COMMANDS.values():
        assert f"| `{command.prog}` | `{command.environment_section.upper()}` |" in page, command.prog
        tables = ", then ".join(f"`[{table}]`" for table in command.toml_sections)
        assert f"| `{command.prog}` | {tables}" in page, command.prog
