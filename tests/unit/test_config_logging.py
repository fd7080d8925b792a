"""setup_logging: line format, sinks, a sink that cannot be opened, the .conf override."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler.config.logging_setup import setup_logging
from scaler.config.sections import LoggingSettings

LINE = re.compile(r"^\[INFO\]\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[+-]\d{4}: scheduler: hello$")


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_file_sink_and_line_format(tmp_path: Path) -> None:
    log = tmp_path / "scheduler.log"
    setup_logging(LoggingSettings(logging_paths=(str(log),)), "scheduler")
    logging.getLogger("scaler.anything").info("hello")
    logging.getLogger("scaler.anything").debug("not at INFO")
    assert LINE.match(log.read_text().strip())


def test_stdout_and_stderr_are_streams(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(LoggingSettings(logging_paths=("/dev/stdout", "/dev/stderr"), logging_level="WARNING"), "worker")
    logging.getLogger("x").warning("careful")
    captured = capsys.readouterr()
    assert "worker: careful" in captured.out and "worker: careful" in captured.err


def test_unopenable_file_is_reported_once_and_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing_directory = tmp_path / "no" / "such" / "scheduler.log"
    setup_logging(LoggingSettings(logging_paths=("/dev/stdout", str(missing_directory))), "scheduler")
    logging.getLogger("x").info("hello")
    logging.getLogger("x").info("hello")
    captured = capsys.readouterr()
    assert captured.err.count(f"cannot open log file {missing_directory}") == 1
    assert captured.out.count("scheduler: hello") == 2


def test_all_sinks_failing_falls_back_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(LoggingSettings(logging_paths=(str(tmp_path / "no" / "x.log"),)), "scheduler")
    logging.getLogger("x").info("hello")
    assert "scheduler: hello" in capsys.readouterr().err


def test_second_call_replaces_the_handlers(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(LoggingSettings(), "a")
    setup_logging(LoggingSettings(), "b")
    logging.getLogger("x").info("once")
    assert capsys.readouterr().out.count("once") == 1


def test_config_file_overrides_the_other_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "from_conf.log"
    conf = tmp_path / "logging.conf"
    conf.write_text(
        "[loggers]\nkeys=root\n[handlers]\nkeys=file\n[formatters]\nkeys=plain\n"
        "[logger_root]\nlevel=DEBUG\nhandlers=file\n"
        f"[handler_file]\nclass=FileHandler\nformatter=plain\nargs=({str(log)!r},)\n"
        "[formatter_plain]\nformat=CONF %(message)s\n"
    )
    setup_logging(LoggingSettings(logging_config_file=str(conf)), "scheduler")
    logging.getLogger("x").debug("configured")
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert log.read_text() == "CONF configured\n"
    assert "configured" not in capsys.readouterr().out


def test_broken_config_file_falls_back_to_the_other_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "broken.conf"
    conf.write_text("[loggers]\nkeys=root\n")
    setup_logging(LoggingSettings(logging_config_file=str(conf)), "scheduler")
    logging.getLogger("x").info("still logged")
    captured = capsys.readouterr()
    assert f"cannot use logging config file {conf}" in captured.err
    assert "scheduler: still logged" in captured.out


def test_json_format_is_one_object_per_line_with_the_ids_a_record_has(tmp_path: Path) -> None:
    """Checked by switching it off: with logging_format ignored the lines are text and json.loads fails."""
    import json

    path = tmp_path / "log.jsonl"
    setup_logging(LoggingSettings(logging_paths=(str(path),), logging_format="json"), "worker")
    log = logging.getLogger("scaler.test")
    log.info("task %s done\nsecond line", "abc", extra={"task_id": b"\x01\x02", "worker": "Worker|FIX|1"})
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4}", first["time"])
    assert {key: first[key] for key in ("level", "logger", "component", "message", "task_id", "worker")} == {
        "level": "INFO", "logger": "scaler.test", "component": "worker", "message": "task abc done\nsecond line",
        "task_id": "0102", "worker": "Worker|FIX|1",
    }  # fmt: skip
    assert second["level"] == "ERROR" and "ValueError: boom" in second["exception"] and "task_id" not in second
