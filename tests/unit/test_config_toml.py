"""TOML sections: key spellings, value shapes, older tables, 1.x keys, and the `scaler FILE` launcher's view."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from scaler.config.loader import load_launcher_file, load_section, load_worker_manager, section_from_sources
from scaler.config.sections import (
    AWSHPCWorkerManagerConfig,
    ECSWorkerManagerConfig,
    GUIConfig,
    NativeWorkerManagerConfig,
    SchedulerConfig,
    SymphonyWorkerManagerConfig,
    TopConfig,
)
from scaler.config.toml_file import ConfigError, SectionSpec, section_from_table

pytestmark = pytest.mark.usefixtures("no_scaler_environment")

ADDRESS = "tcp://127.0.0.1:8516"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


def scheduler_from(tmp_path: Path, body: str) -> SchedulerConfig:
    config = write(tmp_path, f'[scheduler]\nbind_address = "{ADDRESS}"\n{body}\n')
    return load_section(SchedulerConfig, ["-c", config], prog="scaler_scheduler", toml_sections=["scheduler"])


def table_to_section(section_type: type, table: Mapping[str, object], label: str = "[t]") -> object:
    toml = section_from_table(section_type, table, path="f.toml", label=label)
    return section_from_sources(section_type, toml=toml)


def test_section_spec_parsing() -> None:
    assert SectionSpec.parse("scheduler") == SectionSpec("scheduler")
    assert SectionSpec.parse("worker_manager[type=aws_hpc]") == SectionSpec("worker_manager", ("type", "aws_hpc"))
    assert SectionSpec.parse("worker_manager[type=aws_hpc]").label == '[[worker_manager]] entry with type = "aws_hpc"'
    with pytest.raises(ValueError):
        SectionSpec.parse("a b")


def test_hyphenated_keys_and_aliases(tmp_path: Path) -> None:
    section = scheduler_from(tmp_path, "worker-timeout-seconds = 5\nworker_io_threads = 3")
    assert (section.worker_timeout_seconds, section.io_threads) == (5, 3)


def test_same_setting_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="sets bind_address twice"):
        section_from_table(SchedulerConfig, {"bind_address": "a", "scheduler_address": "b"}, path="f", label="[s]")


def test_list_setting_takes_an_array_or_one_string(tmp_path: Path) -> None:
    assert scheduler_from(tmp_path, 'logging_paths = "/tmp/a.log"').logging_paths == ("/tmp/a.log",)
    assert scheduler_from(tmp_path, 'logging_paths = ["/dev/stdout", "/tmp/a.log"]').logging_paths == (
        "/dev/stdout",
        "/tmp/a.log",
    )
    # a comma string is not split: it is one path
    assert scheduler_from(tmp_path, 'logging_paths = "a,b"').logging_paths == ("a,b",)


def test_booleans_and_numbers(tmp_path: Path) -> None:
    section = scheduler_from(tmp_path, "protected = true\nclient_timeout_seconds = 1.5\nio_threads = 2")
    assert (section.protected, section.client_timeout_seconds, section.io_threads) == (True, 1.5, 2)


@pytest.mark.parametrize("timeout", ["5", '"5"', "5.0"])
def test_top_timeout_accepts_int_string_and_float(timeout: str, tmp_path: Path) -> None:
    # surface.md §7.7: the reference crashed on the documented `timeout = 5`
    config = write(tmp_path, f'[top]\nmonitor_address = "tcp://127.0.0.1:8518"\ntimeout = {timeout}\n')
    assert load_section(TopConfig, ["-c", config], prog="scaler_top", toml_sections=["top"]).timeout == 5.0


def test_choices_are_case_insensitive(tmp_path: Path) -> None:
    # surface.md §7.1: the docs say FIXED, the reference parser wanted fixed; both work here
    config = write(
        tmp_path,
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{ADDRESS}"\n'
        'worker_manager_id = "m"\nmode = "FIXED"\n',
    )
    section = load_worker_manager(["baremetal_native", "-c", config])
    assert isinstance(section, NativeWorkerManagerConfig) and section.mode == "fixed"


def test_other_sections_are_ignored(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        f'[top]\nmonitor_address = "x"\nnonsense = 1\n[gui]\nwhatever = 2\n[scheduler]\nbind_address = "{ADDRESS}"\n',
    )
    assert load_section(SchedulerConfig, ["-c", config], prog="s", toml_sections=["scheduler"]).bind_address == ADDRESS


# --- worker managers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "extra", "section_type"),
    [
        ("baremetal_native", "", NativeWorkerManagerConfig),
        ("aws_raw_ecs", 'ecs_subnets = "subnet-1,subnet-2"\necs_security_groups = "sg-1"', ECSWorkerManagerConfig),
        ("aws_hpc", 'job_queue = "q"\njob_definition = "d"\ns3_bucket = "b"', AWSHPCWorkerManagerConfig),
        ("symphony", 'service_name = "svc"', SymphonyWorkerManagerConfig),
    ],
)
def test_each_worker_manager_reads_its_entry(type_name: str, extra: str, section_type: type, tmp_path: Path) -> None:
    entries = "".join(
        f'[[worker_manager]]\ntype = "{other}"\nworker_manager_id = "{other}"\n'
        for other in ("baremetal_native", "aws_raw_ecs", "aws_hpc", "symphony")
        if other != type_name
    )
    mine = f'[[worker_manager]]\ntype = "{type_name}"\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "me"\n'
    config = write(tmp_path, entries + mine + extra + "\n")
    section = load_worker_manager([type_name, "-c", config])
    assert type(section) is section_type
    assert (section.scheduler_address, section.worker_manager_id) == (ADDRESS, "me")


def test_single_worker_manager_table_is_accepted(tmp_path: Path) -> None:
    config = write(tmp_path, f'[worker_manager]\ntype = "symphony"\nscheduler_address = "{ADDRESS}"\n')
    section = load_worker_manager(["symphony", "-c", config, "-wmi", "m", "-sn", "svc"])
    assert isinstance(section, SymphonyWorkerManagerConfig) and section.service_name == "svc"


def test_seed_worker_adapter_tables(tmp_path: Path) -> None:
    # seed 001's section table: scaler_worker_adapter_native -> [native_worker_adapter], and symphony
    config = write(
        tmp_path,
        f'[native_worker_adapter]\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "n"\nmax_workers = 6\n'
        f'[symphony_worker_adapter]\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "s"\nservice_name = "x"\n',
    )
    native = load_worker_manager(["baremetal_native", "-c", config])
    assert isinstance(native, NativeWorkerManagerConfig) and native.max_task_concurrency == 6
    symphony = load_worker_manager(["symphony", "-c", config])
    assert isinstance(symphony, SymphonyWorkerManagerConfig) and symphony.service_name == "x"


def test_native_num_of_workers_alias_and_aws_hpc_name(tmp_path: Path) -> None:
    """`-n` is the pool size of a native manager and the (retired) name of an aws_hpc one (reference surface)."""
    native = load_worker_manager(["baremetal_native", ADDRESS, "-wmi", "m", "-n", "3"])
    assert isinstance(native, NativeWorkerManagerConfig) and native.max_task_concurrency == 3
    hpc_argv = ["aws_hpc", ADDRESS, "-wmi", "m", "-q", "q", "-d", "d", "--s3-bucket", "b"]
    hpc = load_worker_manager([*hpc_argv, "-n", "3"])
    assert isinstance(hpc, AWSHPCWorkerManagerConfig) and hpc == load_worker_manager(hpc_argv)


# --- 1.x keys --------------------------------------------------------------------------------------------------


def test_allocate_policy_capability(tmp_path: Path) -> None:
    assert scheduler_from(tmp_path, 'allocate_policy = "capability"').policy_content == (
        "allocate=capability; scaling=vanilla"
    )


def test_allocate_policy_even_keeps_ignoring_capabilities(tmp_path: Path) -> None:
    """1.x `even` stays even_load, though the default allocation is capability now."""
    assert scheduler_from(tmp_path, 'allocate_policy = "even"').policy_content == "allocate=even_load; scaling=vanilla"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('allocate_policy = "random"', "allowed: even, capability"),
        ('allocate_policy = "even"\npolicy_content = "allocate=even_load; scaling=no"', "keep only policy_content"),
        ('allocate_policy = "even"\npolicy_engine_type = "waterfall_v1"', "only applies to"),
    ],
)
def test_allocate_policy_conflicts(body: str, message: str) -> None:
    table = {"bind_address": ADDRESS, **dict(line.split(" = ") for line in body.splitlines())}
    table = {key: value.strip('"') for key, value in table.items()}
    with pytest.raises(ConfigError, match=message):
        section_from_table(SchedulerConfig, table, path="f.toml", label="[scheduler]")


def test_policy_content_from_a_flag_beats_allocate_policy_in_the_file(tmp_path: Path) -> None:
    config = write(tmp_path, f'[scheduler]\nbind_address = "{ADDRESS}"\nallocate_policy = "even"\n')
    section = load_section(
        SchedulerConfig, ["-c", config, "-pc", "allocate=capability; scaling=no"], prog="s", toml_sections=["scheduler"]
    )
    assert section.policy_content == "allocate=capability; scaling=no"


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"web_port": 8081}, "127.0.0.1:8081"),
        ({"web_host": "127.0.0.1"}, "127.0.0.1:50001"),
        ({"web_host": "localhost", "web_port": "9000"}, "localhost:9000"),
    ],
)
def test_webui_host_and_port(table: dict[str, object], expected: str) -> None:
    section = table_to_section(GUIConfig, {"monitor_address": "tcp://127.0.0.1:8518", **table})
    assert isinstance(section, GUIConfig) and section.gui_address == expected


def test_webui_port_must_be_a_port() -> None:
    with pytest.raises(ConfigError, match="expected a port"):
        section_from_table(GUIConfig, {"web_port": 0}, path="f.toml", label="[webui]")
    with pytest.raises(ConfigError, match="keep only gui_address"):
        section_from_table(GUIConfig, {"web_port": 1, "gui_address": "a:1"}, path="f.toml", label="[webui]")


def test_reference_launcher_subtables_are_flattened() -> None:
    table = {
        "bind_address": ADDRESS,
        "policy": {"policy_engine_type": "waterfall_v1", "policy_content": "1, a"},
        "logging_config": {"level": "DEBUG", "paths": ["/dev/stderr"]},
    }
    section = table_to_section(SchedulerConfig, table)
    assert isinstance(section, SchedulerConfig)
    assert (section.policy_engine_type, section.policy_content) == ("waterfall_v1", "1, a")
    assert (section.logging_level, section.logging_paths) == ("DEBUG", ("/dev/stderr",))


def test_unknown_key_inside_a_subtable_names_it() -> None:
    with pytest.raises(ConfigError, match=r'unknown key "policy\.engine"'):
        section_from_table(SchedulerConfig, {"policy": {"engine": "simple"}}, path="f.toml", label="[scheduler]")


# --- `scaler FILE` ---------------------------------------------------------------------------------------------


def test_launcher_file_reads_every_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(
        tmp_path,
        '[object_storage_server]\nbind_address = "tcp://127.0.0.1:8517"\n'
        f'[scheduler]\nbind_address = "{ADDRESS}"\nobject_storage_address = "tcp://127.0.0.1:8517"\n'
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "a"\n'
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "b"\n'
        '[gui]\nmonitor_address = "tcp://127.0.0.1:8518"\ngui_address = "127.0.0.1:50001"\n'
        '[top]\nmonitor_address = "tcp://127.0.0.1:8518"\n',
    )
    monkeypatch.setenv("SCALER_LOGGING_LEVEL", "DEBUG")  # the launcher honours the environment too
    launcher = load_launcher_file(config)
    assert launcher.object_storage_server is not None and launcher.scheduler is not None and launcher.gui
    assert [manager.worker_manager_id for manager in launcher.worker_managers] == ["a", "b"]
    assert launcher.scheduler.logging_level == "DEBUG"


def test_the_launcher_notes_the_retired_keys_of_its_worker_managers(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        f'[[worker_manager]]\ntype = "orb_aws_ec2"\nscheduler_address = "{ADDRESS}"\naws_region = "us-east-1"\n'
        'network_backend = "zmq"\n',
    )
    notices = load_launcher_file(config).notices
    assert (
        len(notices) == 1 and "network_backend" in notices[0] and "ignored: the workers always use ZeroMQ" in notices[0]
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[top]\nmonitor_address = "x"\n', "has none of"),
        ('[[worker_manager]]\nworker_manager_id = "a"\n', "needs type = one of"),
        ('[[worker_manager]]\ntype = "k8s"\n', 'it has "k8s"\\)'),
        ('[[worker_manager]]\ntype = "baremetal_natve"\n', 'it has "baremetal_natve"; did you mean "baremetal_native"'),
        (
            f'[[worker_manager]]\ntype = "symphony"\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "a"\n'
            'service_name = "s"\n' * 2,
            "worker_manager_id must differ",
        ),
        ('[scheduler]\nbind_adress = "x"\n', 'did you mean "bind_address"'),
    ],
)
def test_launcher_file_refusals(text: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        load_launcher_file(write(tmp_path, text))


def test_a_misspelt_section_is_refused_with_its_line_and_the_closest_name(tmp_path) -> None:
    from scaler.config.toml_file import ConfigError, read_toml_file

    path = tmp_path / "stack.toml"
    path.write_text('[scheduler]\nprotected = true\n\n[[worker_managr]]\ntype = "baremetal_native"\n')
    with pytest.raises(
        ConfigError, match=r"line 4: unknown section \[worker_managr\]; did you mean \[worker_manager\]"
    ):
        read_toml_file(str(path))


def test_the_seeds_unified_file_and_a_key_outside_any_section(tmp_path) -> None:
    from scaler.config.toml_file import ConfigError, read_toml_file

    unified = tmp_path / "example_config.toml"
    unified.write_text("[scheduler]\n[cluster]\n[object_storage_server]\n[webui]\n[top]\n[gui]\n[security]\n")
    assert set(read_toml_file(str(unified))) == {"scheduler", "cluster", "object_storage_server", "webui", "top",
                                                 "gui", "security"}  # fmt: skip
    stray = tmp_path / "stray.toml"
    stray.write_text("logging_level = 'INFO'\n[scheduler]\n")
    with pytest.raises(ConfigError, match=r"line 1: logging_level = \.\.\. is outside any section"):
        read_toml_file(str(stray))
