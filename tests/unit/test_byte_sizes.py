"""Byte-size settings (issue 32 item 3): one parser for every such setting, the same forms from every source, and
a refusal that names the setting and the accepted forms. The default memory budget of the object storage.

Checked by switching the mechanism off: without the loader's byte-size validator, `--max-memory 200MB` is
refused as "an integer" and the parsing tests through the loader fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.config.byte_size import format_byte_size, parse_byte_size
from scaler.config.loader import ConfigError, load_launcher_file, load_section
from scaler.config.sections import ObjectStorageServerConfig, SchedulerConfig, WorkerConfig
from scaler.object_storage.memory_budget import cgroup_memory_limit_bytes, machine_memory_bytes, memory_budget

GiB = 1024**3


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("12", 12),
        (12, 12),
        ("200MB", 200_000_000),
        ("200 mb", 200_000_000),
        ("4GiB", 4 * GiB),
        ("1.5GB", 1_500_000_000),
        ("0.5KiB", 512),
        ("3TiB", 3 * 1024**4),
        ("7B", 7),
    ],
)
def test_accepted_forms(text: object, size: int) -> None:
    assert parse_byte_size(text) == size


@pytest.mark.parametrize("text", ["", "GB", "4GB5", "-3", "10K", "4 GiBs", "1e9", "two", True])
def test_refused_forms_say_what_is_accepted(text: object) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 200MB or 4GiB"):
        parse_byte_size(text)


def test_sizes_are_shown_in_binary_units() -> None:
    assert [format_byte_size(n) for n in (1, 512, 1024, 1536 * 1024, 4 * GiB)] == [
        "1 byte", "512 bytes", "1 KiB", "1.5 MiB", "4 GiB",
    ]  # fmt: skip


def _storage(argv: list[str]) -> ObjectStorageServerConfig:
    return load_section(ObjectStorageServerConfig, ["tcp://127.0.0.1:1", *argv], prog="s", toml_sections=["x"])


def test_the_storage_takes_its_budget_and_spill_directory_from_flags_environment_and_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _storage([]).max_memory is None and _storage([]).spill_directory is None
    given = _storage(["--max-memory", "200MB", "--spill-directory", str(tmp_path)])
    assert (given.max_memory, given.spill_directory) == (200_000_000, str(tmp_path))
    monkeypatch.setenv("SCALER_X_MAX_MEMORY", "1GiB")
    assert _storage([]).max_memory == GiB
    monkeypatch.delenv("SCALER_X_MAX_MEMORY")
    config = tmp_path / "stack.toml"
    config.write_text(
        '[object_storage_server]\nbind_address = "tcp://127.0.0.1:2"\nmax_memory = "2GiB"\n'
        f'spill_directory = "{tmp_path}"\n'
        '[scheduler]\nbind_address = "tcp://127.0.0.1:3"\nobject_storage_max_memory = 1000000\n'
        'object_storage_spill_directory = "/var/tmp/spill"\n'
    )
    launcher = load_launcher_file(str(config))
    assert launcher.object_storage_server is not None and launcher.scheduler is not None
    assert launcher.object_storage_server.max_memory == 2 * GiB
    assert launcher.scheduler.object_storage_max_memory == 1_000_000
    assert launcher.scheduler.object_storage_spill_directory == "/var/tmp/spill"


def test_the_scheduler_flags_for_its_storage() -> None:
    config = load_section(
        SchedulerConfig,
        ["tcp://127.0.0.1:1", "--object-storage-max-memory", "4GiB", "--object-storage-spill-directory", "/tmp/s"],
        prog="scaler_scheduler", toml_sections=["scheduler"],
    )  # fmt: skip
    assert (config.object_storage_max_memory, config.object_storage_spill_directory) == (4 * GiB, "/tmp/s")


def test_the_worker_trim_threshold_is_a_byte_size_too() -> None:
    config = load_section(WorkerConfig, ["tcp://127.0.0.1:1", "-tm", "512MiB"], prog="w", toml_sections=["worker"])
    assert config.trim_memory_threshold_bytes == 512 * 1024**2


@pytest.mark.parametrize("value", ["4GB5", "0", "lots"])
def test_a_bad_size_is_refused_naming_the_setting_and_the_forms(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _storage(["--max-memory", value])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f'bad value "{value}" for --max-memory' in error
    assert "a byte size > 0" in error and "e.g. 200MB or 4GiB" in error
    config = tmp_path / "bad.toml"
    config.write_text(f'[object_storage_server]\nbind_address = "tcp://127.0.0.1:2"\nmax_memory = "{value}"\n')
    with pytest.raises(ConfigError, match=r"max_memory.*e\.g\. 200MB or 4GiB"):
        load_launcher_file(str(config))


# ---------------------------------------------------------------- the default budget


def _files(contents: dict[str, str]):  # type: ignore[no-untyped-def]
    return contents.get


MEMINFO = {"/proc/meminfo": "MemTotal:       16384000 kB\nMemFree: 1 kB\n"}


def test_the_default_budget_is_half_of_the_machine_without_a_cgroup_limit() -> None:
    v1_unlimited = {
        **MEMINFO,
        "/proc/self/cgroup": "4:memory:/\n",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
    }
    v2_unlimited = {**MEMINFO, "/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "max"}
    for files in (MEMINFO, v1_unlimited, v2_unlimited):
        budget = memory_budget(None, _files(files))
        assert budget.bytes == 16384000 * 1024 // 2
        assert "half of the machine's" in budget.why


def test_the_default_budget_is_half_of_a_smaller_cgroup_limit_v1_and_v2() -> None:
    v1 = {
        **MEMINFO,
        "/proc/self/cgroup": "9:memory:/job\n",
        "/sys/fs/cgroup/memory/job/memory.limit_in_bytes": str(2 * GiB),
    }
    v2 = {
        **MEMINFO,
        "/proc/self/cgroup": "0::/user.slice/job\n",
        "/sys/fs/cgroup/user.slice/job/memory.max": "3221225472\n",
    }
    assert cgroup_memory_limit_bytes(_files(v1)) == 2 * GiB
    assert memory_budget(None, _files(v1)).bytes == GiB
    assert memory_budget(None, _files(v2)).bytes == 3 * GiB // 2
    assert "cgroup's memory limit of 3 GiB" in memory_budget(None, _files(v2)).why


def test_a_given_budget_wins_and_an_unknown_machine_still_gets_one() -> None:
    assert memory_budget(123, _files(MEMINFO)).bytes == 123
    assert machine_memory_bytes(_files({})) is None
    assert memory_budget(None, _files({})).bytes == 2 * GiB
