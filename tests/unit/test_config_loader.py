"""Loading sections from flags, environment and TOML: precedence, spellings, the users' documents, refusals."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from scaler.config.byte_size import format_byte_size
from scaler.config.installed_docs import find_page
from scaler.config.loader import load_section, load_worker_manager, worker_manager_toml_sections
from scaler.config.manager_types import MANAGER_TYPES
from scaler.config.sections import (
    AWSHPCWorkerManagerConfig,
    ClusterConfig,
    ECSWorkerManagerConfig,
    GUIConfig,
    NativeWorkerManagerConfig,
    NestedParents,
    ObjectStorageServerConfig,
    SchedulerConfig,
    SymphonyWorkerManagerConfig,
    TopConfig,
)

#: Seed 001 ("Configuring with TOML Files", scenario 1), verbatim.
SEED_EXAMPLE_CONFIG = """\
# This is a unified configuration file for all Scaler components.

[scheduler]
scheduler_address = "tcp://127.0.0.1:6378"
object_storage_address = "tcp://127.0.0.1:6379"
monitor_address = "tcp://127.0.0.1:6380"
allocate_policy = "even"
logging_level = "INFO"
logging_paths = ["/dev/stdout", "/var/log/scaler/scheduler.log"]

[cluster]
scheduler_address = "tcp://127.0.0.1:6378"
num_of_workers = 8
per_worker_capabilities = "linux,cpu=8"
task_timeout_seconds = 600

[object_storage_server]
object_storage_address = "tcp://127.0.0.1:6379"

[webui]
monitor_address = "tcp://127.0.0.1:6380"
web_port = 8081
"""

pytestmark = pytest.mark.usefixtures("no_scaler_environment")

ADDRESS = "tcp://127.0.0.1:8516"


def test_configuration_md_shows_the_seed_example_file_whole() -> None:
    """docs/configuration.md runs the users' unified example file "as written": the page shows that file (it once
    named it without showing it, so its commands could not be run from the page), and it is the one these tests
    load."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert f"```toml\n# example_config.toml\n{SEED_EXAMPLE_CONFIG}```" in page


@pytest.fixture
def example_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "example_config.toml").write_text(SEED_EXAMPLE_CONFIG)
    return "example_config.toml"


def write(tmp_path: Path, text: str, name: str = "config.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def scheduler(argv: Sequence[str]) -> SchedulerConfig:
    return load_section(SchedulerConfig, argv, prog="scaler_scheduler", toml_sections=["scheduler"])


def cluster(argv: Sequence[str]) -> ClusterConfig:
    return load_section(ClusterConfig, argv, prog="scaler_cluster", toml_sections=["cluster"])


def refusal(capsys: pytest.CaptureFixture[str], load: Any, *args: Any, **kwargs: Any) -> str:
    """Run a load that must fail: exit code 2 and exactly one error message, no traceback."""
    with pytest.raises(SystemExit) as exited:
        load(*args, **kwargs)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.count("error:") == 1 and "Traceback" not in error
    return error


# --- precedence: flag > SCALER_<SECTION>_<FIELD> > SCALER_<FIELD> > file > default, for every section ------


@dataclasses.dataclass(frozen=True)
class PrecedenceCase:
    section_type: type
    toml_sections: tuple[str, ...]
    #: the file: table header and the required settings, without the field under test
    table: str
    field: str
    flag: str
    env_section: str


PRECEDENCE_CASES = [
    PrecedenceCase(
        SchedulerConfig, ("scheduler",), f'[scheduler]\nbind_address = "{ADDRESS}"', "worker_timeout_seconds", "-wt",
        "SCHEDULER",
    ),
    PrecedenceCase(
        ObjectStorageServerConfig, ("object_storage_server",),
        '[object_storage_server]\nbind_address = "tcp://127.0.0.1:8517"', "identity", "--identity",
        "OBJECT_STORAGE_SERVER",
    ),
    PrecedenceCase(
        ClusterConfig, ("cluster",), f'[cluster]\nscheduler_address = "{ADDRESS}"', "death_timeout_seconds", "-ds",
        "CLUSTER",
    ),
    PrecedenceCase(
        NativeWorkerManagerConfig, worker_manager_toml_sections("baremetal_native"),
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "m"',
        "max_task_concurrency", "-mtc", "BAREMETAL_NATIVE",
    ),
    PrecedenceCase(
        ECSWorkerManagerConfig, worker_manager_toml_sections("aws_raw_ecs"),
        f'[[worker_manager]]\ntype = "aws_raw_ecs"\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "m"\n'
        'ecs_subnets = "subnet-1,subnet-2"',
        "ecs_task_cpu", "--ecs-task-cpu", "AWS_RAW_ECS",
    ),
    PrecedenceCase(
        AWSHPCWorkerManagerConfig, worker_manager_toml_sections("aws_hpc"),
        f'[[worker_manager]]\ntype = "aws_hpc"\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "m"\n'
        'job_queue = "q"\njob_definition = "d"\ns3_bucket = "b"',
        "max_concurrent_jobs", "-mcj", "AWS_HPC",
    ),
    PrecedenceCase(
        SymphonyWorkerManagerConfig, worker_manager_toml_sections("symphony"),
        f'[[worker_manager]]\ntype = "symphony"\nscheduler_address = "{ADDRESS}"\nworker_manager_id = "m"\n'
        'service_name = "svc"',
        "per_worker_task_queue_size", "-wtqs", "SYMPHONY",
    ),
    PrecedenceCase(TopConfig, ("top",), '[top]\nmonitor_address = "tcp://127.0.0.1:8518"', "timeout", "-t", "TOP"),
    PrecedenceCase(
        GUIConfig, ("gui", "webui"), '[gui]\nmonitor_address = "tcp://127.0.0.1:8518"', "task_log_max_size", "-tl",
        "GUI",
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", PRECEDENCE_CASES, ids=lambda case: case.section_type.__name__)
def test_precedence_flag_over_environment_over_file_over_default(
    case: PrecedenceCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    is_text = case.field == "identity"
    literal = (lambda v: f'"{v}"') if is_text else str
    value = str if is_text else int

    def load(*argv: str) -> Any:
        section: Any = load_section(case.section_type, argv, prog="test", toml_sections=case.toml_sections)
        return getattr(section, case.field)

    bare = write(tmp_path, case.table + "\n", "bare.toml")
    default = next(f.default for f in dataclasses.fields(case.section_type) if f.name == case.field)
    assert load("-c", bare) == default

    config = write(tmp_path, f"{case.table}\n{case.field} = {literal(11)}\n")
    assert load("-c", config) == value(11)

    monkeypatch.setenv(f"SCALER_{case.field.upper()}", "22")
    assert load("-c", config) == value(22)

    monkeypatch.setenv(f"SCALER_{case.env_section}_{case.field.upper()}", "33")
    assert load("-c", config) == value(33)

    assert load("-c", config, case.flag, "44") == value(44)


def test_environment_alone_can_give_required_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALER_SCHEDULER_BIND_ADDRESS", ADDRESS)
    monkeypatch.setenv("scaler_scheduler_protected", "yes")  # names are not case-sensitive
    monkeypatch.setenv("SCALER_LOGGING_PATHS", "/tmp/one.log")  # a list setting takes one plain value...
    section = scheduler([])
    assert (section.bind_address, section.protected, section.logging_paths) == (ADDRESS, True, ("/tmp/one.log",))
    monkeypatch.setenv("SCALER_LOGGING_PATHS", '["/dev/stdout", "/tmp/two.log"]')  # ... or a JSON array
    assert scheduler([]).logging_paths == ("/dev/stdout", "/tmp/two.log")


@pytest.mark.parametrize(
    ("section_type", "prog", "toml_section"),
    [(TopConfig, "scaler_top", "top"), (GUIConfig, "scaler_gui", "gui"),
     (SchedulerConfig, "scaler_scheduler", "scheduler")],
)  # fmt: skip
def test_the_environment_example_of_help_is_a_setting_the_command_takes(
    section_type: type,
    prog: str,
    toml_section: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """issue 60: `scaler_top -h` gave SCALER_TOP_LOGGING_LEVEL=DEBUG as its example, and scaler_top has no logging
    settings. The example `-h` gives is set here as given, with another value: the command reads it."""
    with pytest.raises(SystemExit):
        load_section(section_type, ["-h"], prog=prog, toml_sections=[toml_section])
    (name, value) = re.findall(r"e\.g\. (SCALER_\w+)=(\S+)\)", capsys.readouterr().out)[0]
    field = name.removeprefix(f"SCALER_{toml_section.upper()}_").lower()
    assert field in {field.name for field in dataclasses.fields(section_type)}
    other = "WARNING" if field == "logging_level" else str(float(value) + 1)
    monkeypatch.setenv(name, other)
    loaded = load_section(section_type, [ADDRESS], prog=prog, toml_sections=[toml_section])
    assert str(getattr(loaded, field)) == other


def test_section_environment_does_not_leak_into_other_sections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALER_SCHEDULER_EVENT_LOOP", "uvloop")
    assert cluster([ADDRESS]).event_loop == "builtin"
    assert scheduler([ADDRESS]).event_loop == "uvloop"


def test_flag_values_not_typed_do_not_override_the_file(tmp_path: Path) -> None:
    config = write(tmp_path, f'[scheduler]\nbind_address = "{ADDRESS}"\nprotected = true\nio_threads = 4\n')
    section = scheduler(["-c", config, "-wt", "5"])
    assert (section.protected, section.io_threads, section.worker_timeout_seconds) == (True, 4, 5)


def test_positional_on_command_line_beats_the_file(tmp_path: Path) -> None:
    config = write(tmp_path, '[scheduler]\nbind_address = "tcp://127.0.0.1:1"\n')
    assert scheduler([ADDRESS, "-c", config]).bind_address == ADDRESS


# --- spellings of surface.md ---------------------------------------------------------------------------------

SCHEDULER_SPELLINGS = [
    # (argv after the address, field, expected)
    (["-osa", "tcp://127.0.0.1:8517"], "object_storage_address", "tcp://127.0.0.1:8517"),
    (["--object-storage-address", "tcp://127.0.0.1:8517"], "object_storage_address", "tcp://127.0.0.1:8517"),
    (["-aosa", "tcp://1.2.3.4:8517"], "advertised_object_storage_address", "tcp://1.2.3.4:8517"),
    (["--advertised-object-storage-address", "tcp://1.2.3.4:8517"], "advertised_object_storage_address",
     "tcp://1.2.3.4:8517"),
    (["-ma", "tcp://127.0.0.1:9000"], "monitor_address", "tcp://127.0.0.1:9000"),
    (["--monitor-address", "tcp://127.0.0.1:9000"], "monitor_address", "tcp://127.0.0.1:9000"),
    (["-sri", "3"], "status_report_interval_seconds", 3),
    (["--status-report-interval-seconds", "3"], "status_report_interval_seconds", 3),
    (["-p"], "protected", True),
    (["--protected"], "protected", True),
    (["-mt", "-1"], "max_number_of_tasks_waiting", -1),
    (["--max-number-of-tasks-waiting", "100"], "max_number_of_tasks_waiting", 100),
    (["-ct", "7"], "client_timeout_seconds", 7),
    (["--client-timeout-seconds", "7"], "client_timeout_seconds", 7),
    (["-wt", "8"], "worker_timeout_seconds", 8),
    (["--worker-timeout-seconds", "8"], "worker_timeout_seconds", 8),
    (["-ot", "9"], "object_retention_seconds", 9),
    (["--object-retention-seconds", "9"], "object_retention_seconds", 9),
    (["-ls", "-1"], "load_balance_seconds", -1),
    (["--load-balance-seconds", "5"], "load_balance_seconds", 5),
    (["-lbt", "4"], "load_balance_trigger_times", 4),
    (["--load-balance-trigger-times", "4"], "load_balance_trigger_times", 4),
    (["-el", "uvloop"], "event_loop", "uvloop"),
    (["--event-loop", "uvloop"], "event_loop", "uvloop"),
    (["-e", "uvloop"], "event_loop", "uvloop"),  # 1.9
    (["-it", "2"], "io_threads", 2),
    (["--io-threads", "2"], "io_threads", 2),
    (["-wit", "2"], "io_threads", 2),  # 1.x
    (["--worker-io-threads", "2"], "io_threads", 2),  # 1.x
    (["-lp", "/dev/stdout", "/tmp/x.log"], "logging_paths", ("/dev/stdout", "/tmp/x.log")),
    (["--logging-paths", "/dev/stderr"], "logging_paths", ("/dev/stderr",)),
    (["-lcf", "log.conf"], "logging_config_file", "log.conf"),
    (["--logging-config-file", "log.conf"], "logging_config_file", "log.conf"),
    (["-lc", "log.conf"], "logging_config_file", "log.conf"),  # 1.9
    (["-ll", "DEBUG"], "logging_level", "DEBUG"),
    (["--logging-level", "debug"], "logging_level", "DEBUG"),  # choices are not case-sensitive
    (["-et", "waterfall_v1"], "policy_engine_type", "waterfall_v1"),
    (["--policy-engine-type", "waterfall_v1"], "policy_engine_type", "waterfall_v1"),
    (["-pc", "allocate=capability; scaling=no"], "policy_content", "allocate=capability; scaling=no"),
    (["--policy-content", "allocate=capability; scaling=no"], "policy_content", "allocate=capability; scaling=no"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "field", "expected"), SCHEDULER_SPELLINGS, ids=lambda v: str(v))
def test_scheduler_spellings(argv: list[str], field: str, expected: Any) -> None:
    assert getattr(scheduler([ADDRESS, *argv]), field) == expected


CLUSTER_SPELLINGS = [
    (["-n", "3"], "num_of_workers", 3),
    (["--num-of-workers", "3"], "num_of_workers", 3),
    (["-mtc", "3"], "num_of_workers", 3),  # 1.24
    (["--max-task-concurrency", "3"], "num_of_workers", 3),
    (["-wmi", "pool"], "worker_manager_id", "pool"),
    (["--worker-manager-id", "pool"], "worker_manager_id", "pool"),
    (["-osa", "tcp://127.0.0.1:8517"], "object_storage_address", "tcp://127.0.0.1:8517"),
    (["--preload", "mypackage.init:setup"], "preload", "mypackage.init:setup"),
    (["-el", "uvloop"], "event_loop", "uvloop"),
    (["-e", "uvloop"], "event_loop", "uvloop"),
    (["-wit", "2"], "io_threads", 2),
    (["--worker-io-threads", "2"], "io_threads", 2),
    (["-it", "2"], "io_threads", 2),
    (["--io-threads", "2"], "io_threads", 2),
    (["-pwc", "linux,cpu=8"], "per_worker_capabilities", "linux,cpu=8"),
    (["--per-worker-capabilities", "gpu"], "per_worker_capabilities", "gpu"),
    (["-wtqs", "10"], "per_worker_task_queue_size", 10),
    (["--per-worker-task-queue-size", "10"], "per_worker_task_queue_size", 10),
    (["-his", "1"], "heartbeat_interval_seconds", 1),
    (["--heartbeat-interval-seconds", "1"], "heartbeat_interval_seconds", 1),
    (["-hi", "1"], "heartbeat_interval_seconds", 1),  # 1.9
    (["--heartbeat-interval", "1"], "heartbeat_interval_seconds", 1),  # 1.9
    (["-tts", "30"], "task_timeout_seconds", 30),
    (["--task-timeout-seconds", "30"], "task_timeout_seconds", 30),
    (["-dts", "60"], "death_timeout_seconds", 60),
    (["--death-timeout-seconds", "60"], "death_timeout_seconds", 60),
    (["-ds", "60"], "death_timeout_seconds", 60),  # 1.9
    (["-gc", "5"], "garbage_collect_interval_seconds", 5),
    (["--garbage-collect-interval-seconds", "5"], "garbage_collect_interval_seconds", 5),
    (["-tm", "1024"], "trim_memory_threshold_bytes", 1024),
    (["--trim-memory-threshold-bytes", "1024"], "trim_memory_threshold_bytes", 1024),
    (["-lp", "/dev/stderr"], "logging_paths", ("/dev/stderr",)),
    (["-ll", "WARNING"], "logging_level", "WARNING"),
    (["-lcf", "log.conf"], "logging_config_file", "log.conf"),
]


@pytest.mark.parametrize(("argv", "field", "expected"), CLUSTER_SPELLINGS, ids=lambda v: str(v))
def test_cluster_spellings(argv: list[str], field: str, expected: Any) -> None:
    assert getattr(cluster([ADDRESS, *argv]), field) == expected


# ---------------------------------------------------------------- retired settings (sections.RETIRED_SETTINGS)


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        ([ADDRESS, "-hps"], "-hps/--hard-processor-suspend"),
        (["-hps", ADDRESS], "-hps/--hard-processor-suspend"),  # the address is not taken as the flag's value
        ([ADDRESS, "--hard-processor-suspend", "false"], "-hps/--hard-processor-suspend"),
        ([ADDRESS, "--direct-results", "true"], "--direct-results"),  # issue 56: one route
        ([ADDRESS, "--lend-processors", "false"], "--lend-processors"),
    ],
)
def test_a_retired_flag_is_accepted_noted_and_dropped(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cluster(argv) == cluster([ADDRESS])
    assert f"scaler_cluster: note: {option} is accepted for compatibility and ignored" in capsys.readouterr().err


def test_retired_manager_settings_are_noted_and_a_value_never_accepted_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ec2 = ["orb_aws_ec2", ADDRESS, "-wmi", "m", "--aws-region", "us-east-1"]
    assert load_worker_manager([*ec2, "--network-backend", "zmq"]) == load_worker_manager(ec2)
    assert "--network-backend is accepted for compatibility and ignored: the workers always use ZeroMQ" in (
        capsys.readouterr().err
    )
    error = refusal(capsys, load_worker_manager, [*ec2, "--network-backend", "ymq"])
    assert "bad value 'ymq' for --network-backend; allowed: zmq" in error
    hpc = ["aws_hpc", ADDRESS, "-wmi", "m", "-q", "q", "-d", "d", "--s3-bucket", "b"]
    assert load_worker_manager([*hpc, "-n", "mine", "-b", "batch"]) == load_worker_manager(hpc)
    notes = capsys.readouterr().err
    assert "-n/--name is accepted" in notes and "-b/--backend is accepted" in notes
    assert "allowed: batch" in refusal(capsys, load_worker_manager, [*hpc, "-b", "slurm"])


def test_a_retired_key_in_a_file_is_noted_and_a_bad_value_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = f'[[worker_manager]]\ntype = "orb_aws_ec2"\nscheduler_address = "{ADDRESS}"\naws_region = "us-east-1"\n'
    config = write(tmp_path, entry + 'network_backend = "zmq"\n')
    load_worker_manager(["orb_aws_ec2", "-c", config, "-wmi", "m"])
    assert f'note: network_backend = "zmq" in [[worker_manager]] entry with type = "orb_aws_ec2" of {config} is ' \
        "accepted for compatibility and ignored" in capsys.readouterr().err  # fmt: skip
    config = write(tmp_path, entry + 'network_backend = "ymq"\n', name="bad.toml")
    assert 'bad value "ymq" for network_backend' in refusal(capsys, load_worker_manager, ["orb_aws_ec2", "-c", config])


def test_retired_settings_are_not_listed_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        load_worker_manager(["aws_hpc", "-h"])
    text = capsys.readouterr().out
    assert "--backend" not in text and "--name" not in text and "--hard-processor-suspend" not in text


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-p", "False"], False),
        (["-p", "true"], True),
        (["-p"], True),
        (["--protected"], True),
        (["--protected=no"], False),
        (["-p=1"], True),
        ([], True),  # the scheduler is protected by default, as the seeds say
    ],
)
def test_boolean_flag_forms(argv: list[str], expected: bool) -> None:
    assert scheduler([ADDRESS, *argv]).protected is expected


def test_bare_boolean_flag_before_the_positional() -> None:
    section = scheduler(["-p", ADDRESS])
    assert (section.protected, section.bind_address) == (True, ADDRESS)


def test_list_flag_before_the_positional() -> None:
    section = scheduler(["-lp", "/dev/stdout", "/tmp/x.log", ADDRESS])
    assert (section.logging_paths, section.bind_address) == (("/dev/stdout", "/tmp/x.log"), ADDRESS)
    section = scheduler([ADDRESS, "-lp", "/tmp/x.log", "tcp://127.0.0.1:1"])  # the positional was given already
    assert section.logging_paths == ("/tmp/x.log", "tcp://127.0.0.1:1")


# --- the users' documents (seeds 000, 001, 004) ----------------------------------------------------------


def test_seed_scheduler_protected_false() -> None:
    section = scheduler(["tcp://127.0.0.1:8516", "-p", "False"])
    assert section.protected is False and section.bind_address == "tcp://127.0.0.1:8516"


def test_seed_scheduler_event_loop() -> None:
    assert scheduler(["tcp://127.0.0.1:8516", "-e", "uvloop"]).event_loop == "uvloop"
    assert scheduler(["tcp://127.0.0.1:8516", "-el", "uvloop"]).event_loop == "uvloop"


def test_seed_cluster_workers_and_death_timeout() -> None:
    section = cluster(["-n", "10", "tcp://127.0.0.1:8516", "-ds", "300"])
    assert (section.num_of_workers, section.scheduler_address, section.death_timeout_seconds) == (
        10,
        "tcp://127.0.0.1:8516",
        300,
    )


def test_seed_cluster_preload() -> None:
    assert cluster(["tcp://127.0.0.1:8516", "--preload", "mypackage.init:setup"]).preload == "mypackage.init:setup"
    spec = "mypackage.init:configure('production', debug=False)"
    assert cluster(["tcp://127.0.0.1:8516", "--preload", spec]).preload == spec


def test_seed_example_config_object_storage_server(example_config: str) -> None:
    section = load_section(
        ObjectStorageServerConfig,
        ["--config", example_config],
        prog="scaler_object_storage_server",
        toml_sections=["object_storage_server"],
    )
    assert section.bind_address == "tcp://127.0.0.1:6379"


def test_seed_example_config_scheduler(example_config: str, capsys: pytest.CaptureFixture[str]) -> None:
    section = scheduler(["--config", example_config])
    assert section.bind_address == "tcp://127.0.0.1:6378"
    assert section.object_storage_address == "tcp://127.0.0.1:6379"
    assert section.monitor_address == "tcp://127.0.0.1:6380"
    assert section.policy_content == "allocate=even_load; scaling=vanilla"
    assert section.logging_level == "INFO"
    assert section.logging_paths == ("/dev/stdout", "/var/log/scaler/scheduler.log")
    assert "allocate_policy" in capsys.readouterr().err  # the 1.x key is noted, not refused


def test_seed_example_config_cluster(example_config: str) -> None:
    section = cluster(["--config", example_config])
    assert section.scheduler_address == "tcp://127.0.0.1:6378"
    assert section.num_of_workers == 8
    assert section.per_worker_capabilities == "linux,cpu=8"  # a comma string stays a string
    assert section.task_timeout_seconds == 600


def test_seed_example_config_cluster_flag_override(example_config: str) -> None:
    section = cluster(["--config", example_config, "--num-of-workers", "12"])
    assert section.num_of_workers == 12
    assert section.scheduler_address == "tcp://127.0.0.1:6378"


def test_seed_example_config_webui_for_the_gui(example_config: str) -> None:
    section = load_section(GUIConfig, ["--config", example_config], prog="scaler_gui", toml_sections=["gui", "webui"])
    assert (section.monitor_address, section.gui_address) == ("tcp://127.0.0.1:6380", "127.0.0.1:8081")


# --- refusals: one message, exit code 2 --------------------------------------------------------------------


def test_unknown_key_names_key_section_file_and_suggestion(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(
        tmp_path,
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{ADDRESS}"\n'
        'worker_manager_id = "m"\nmax_task_concurency = 4\n',
    )
    error = refusal(capsys, load_worker_manager, ["baremetal_native", "-c", config])
    assert '"max_task_concurency"' in error
    assert '[[worker_manager]] entry with type = "baremetal_native"' in error
    assert config in error
    assert 'did you mean "max_task_concurrency"' in error
    assert "allowed keys:" in error and "worker_manager_id" in error


def test_bad_value_names_key_section_file_value_and_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, f'[scheduler]\nbind_address = "{ADDRESS}"\nlogging_level = "LOUD"\n')
    error = refusal(capsys, scheduler, ["-c", config])
    assert "logging_level in [scheduler] of " + config in error
    assert '"LOUD"' in error
    assert "CRITICAL, ERROR, WARNING, INFO, DEBUG" in error


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("worker_timeout_seconds = -1", "a number > 0"),
        ('io_threads = "many"', "an integer > 0"),
        ('protected = "perhaps"', "a boolean"),
        ("max_number_of_tasks_waiting = -2", "an integer >= -1"),
        ("bind_address = 8516", "a string"),
    ],
)
def test_bad_values_say_what_is_allowed(
    line: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, f"[scheduler]\n{line}\n")
    address = [] if line.startswith("bind_address") else [ADDRESS]  # a flag would hide the file's bad value
    error = refusal(capsys, scheduler, [*address, "-c", config])
    assert f"{line.split(' = ')[0]} in [scheduler] of {config}" in error and expected in error


def test_bad_flag_and_environment_values_name_their_source(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    error = refusal(capsys, scheduler, [ADDRESS, "-wt", "soon"])
    assert '"soon" for -wt/--worker-timeout-seconds' in error
    monkeypatch.setenv("SCALER_SCHEDULER_EVENT_LOOP", "tokio")
    error = refusal(capsys, scheduler, [ADDRESS])
    assert '"tokio" for SCALER_SCHEDULER_EVENT_LOOP' in error and "builtin, uvloop" in error


def test_missing_required_value_names_field_and_section(capsys: pytest.CaptureFixture[str]) -> None:
    error = refusal(capsys, scheduler, [])
    assert "missing setting bind_address" in error and "[scheduler]" in error
    assert "SCALER_SCHEDULER_BIND_ADDRESS" in error


def test_missing_required_value_of_a_worker_manager_names_its_entry(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a file, the message names the [[worker_manager]] entry a file would give it in (it once said 'in the
    [[worker_manager]] entry with type = "symphony" section')."""
    error = refusal(capsys, load_worker_manager, ["symphony", ADDRESS])
    assert (
        'as service_name in the [[worker_manager]] entry with type = "symphony" of a -c/--config file, or as '
        "SCALER_SYMPHONY_SERVICE_NAME" in error
    ), error
    assert "in the [scheduler] section of a -c/--config file" in refusal(capsys, scheduler, [])


def test_missing_required_value_in_a_worker_manager_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, f'[[worker_manager]]\ntype = "aws_hpc"\nscheduler_address = "{ADDRESS}"\n')
    error = refusal(capsys, load_worker_manager, ["aws_hpc", "-c", config, "-wmi", "m", "-q", "q", "-d", "d"])
    assert "missing setting s3_bucket" in error
    assert f'[[worker_manager]] entry with type = "aws_hpc" of {config}' in error


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nowhere.toml")
    assert f"config file {missing} not found" in refusal(capsys, scheduler, ["-c", missing])


def test_broken_toml_names_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, f'[scheduler]\nbind_address = "{ADDRESS}"\nprotected = \n')
    error = refusal(capsys, scheduler, ["-c", config])
    assert config in error and re.search(r"line 3, column \d+", error)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (f"[scheduler]\nbind_address = {ADDRESS}\n",
         f'Invalid value (at line 2, column 16): bind_address = {ADDRESS}; a string is written in quotes: '
         f'bind_address = "{ADDRESS}"'),
        ('[scheduler]\npolicy_content = allocate=even_load; scaling=no\n',
         'a string is written in quotes: policy_content = "allocate=even_load; scaling=no"'),
        ("[cluster]\nnum_of_workers = 4 workers\n", "(at line 2, column 20): num_of_workers = 4 workers"),
        ("[scheduler]\nprotected = \n", "(at line 2, column 13): protected ="),
    ],
)  # fmt: skip
def test_broken_toml_shows_its_line_and_how_to_write_a_string(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    """A string written without quotes, as on a command line, is TOML's "Invalid value": the message shows the line
    and the line written right (it gave only tomllib's "Invalid value (at line 2, column 16)"); other syntax errors
    show their line, with no such hint."""
    error = refusal(capsys, scheduler, ["-c", write(tmp_path, text)])
    assert said in error, error
    if "quotes" not in said:
        assert "quotes" not in error, error


def test_duplicate_worker_manager_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = f'[[worker_manager]]\ntype = "symphony"\nscheduler_address = "{ADDRESS}"\nservice_name = "s"\n'
    config = write(tmp_path, entry + 'worker_manager_id = "a"\n' + entry + 'worker_manager_id = "b"\n')
    error = refusal(capsys, load_worker_manager, ["symphony", "-c", config])
    assert config in error and '2 [[worker_manager]] entries have type = "symphony"' in error


def test_no_worker_manager_entry_of_the_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, f'[[worker_manager]]\ntype = "symphony"\nscheduler_address = "{ADDRESS}"\n')
    error = refusal(capsys, load_worker_manager, ["aws_hpc", "-c", config])
    assert config in error and "0 of its 1 [[worker_manager]] entries match" in error


def test_file_without_the_command_section(example_config: str, capsys: pytest.CaptureFixture[str]) -> None:
    error = refusal(capsys, load_section, TopConfig, ["-c", example_config], prog="scaler_top", toml_sections=["top"])
    assert "has no [top]" in error and "[webui]" in error


def test_unknown_flag_and_unknown_worker_manager_type(capsys: pytest.CaptureFixture[str]) -> None:
    assert "unknown flag --colour" in refusal(capsys, scheduler, [ADDRESS, "--colour", "red"])
    assert 'did you mean "aws_hpc"' in refusal(capsys, load_worker_manager, ["aws-hpc"])


# --- -h ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section_type", "prog"),
    [
        (SchedulerConfig, "scaler_scheduler"),
        (ClusterConfig, "scaler_cluster"),
        (ObjectStorageServerConfig, "scaler_object_storage_server"),
        (NativeWorkerManagerConfig, "scaler_worker_manager baremetal_native"),
        (ECSWorkerManagerConfig, "scaler_worker_manager aws_raw_ecs"),
        (AWSHPCWorkerManagerConfig, "scaler_worker_manager aws_hpc"),
        (SymphonyWorkerManagerConfig, "scaler_worker_manager symphony"),
        (TopConfig, "scaler_top"),
        (GUIConfig, "scaler_gui"),
    ],
)
def test_help_lists_every_setting_with_its_default(
    section_type: type, prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        load_section(section_type, ["-h"], prog=prog, toml_sections=["x"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # undo line wrapping
    for field in dataclasses.fields(section_type):
        if field.metadata.get("positional"):
            assert field.name in text
            continue
        assert f"--{field.name.replace('_', '-')}" in text
        if field.default is dataclasses.MISSING:
            assert "(required)" in text
        elif "default" in field.metadata["help"]:  # the help text says its default ("(default: secure, ...)")
            assert " ".join(field.metadata["help"].split()) in text
        elif field.default is not None:
            shown = " ".join(field.default) if isinstance(field.default, tuple) else str(field.default)
            if field.metadata.get("byte_size"):  # shown with a unit: 1GiB
                shown = format_byte_size(field.default).replace(" ", "")
            assert f"default: {shown.lower() if isinstance(field.default, bool) else shown or chr(34) * 2}" in text
    assert "SCALER_X_<SETTING>" in text and "-c FILE reads [x]" in text


def test_worker_manager_help_lists_the_types(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        load_worker_manager(["-h"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "baremetal_native,aws_raw_ecs,orb_aws_ec2,aws_hpc,symphony" in out
    assert "  aws_hpc           each task as an AWS Batch job" in out  # each type's summary, from its row


@pytest.mark.parametrize("spelling", ["thread", "process", "PROCESS"])
def test_nested_parents_is_spelled_as_before_on_the_command_line_and_in_files(tmp_path: Path, spelling: str) -> None:
    from_flag = cluster([ADDRESS, "--nested-parents", spelling])
    from_file = cluster(
        ["-c", write(tmp_path, f'[cluster]\nscheduler_address = "{ADDRESS}"\nnested_parents = "{spelling}"\n')]
    )
    assert NestedParents.named(from_flag.nested_parents) is NestedParents(spelling.lower())
    assert NestedParents.named(from_file.nested_parents) is NestedParents(spelling.lower())


def test_a_bad_nested_parents_is_refused_naming_the_allowed_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "thread, process" in refusal(capsys, cluster, [ADDRESS, "--nested-parents", "fiber"])
    config = write(tmp_path, f'[cluster]\nscheduler_address = "{ADDRESS}"\nnested_parents = "fiber"\n')
    error = refusal(capsys, cluster, ["-c", config])
    assert "nested_parents" in error and "thread, process" in error
    with pytest.raises(ValueError, match="nested_parents must be one of thread, process, not 'fiber'"):
        NestedParents.named("fiber")


@pytest.mark.parametrize("type_name", sorted(MANAGER_TYPES))
def test_a_manager_types_help_points_at_pages_a_pip_user_has(
    type_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 77, item 10: `scaler_worker_manager slurm -h` and `kubernetes -h` cited `docs/guide/*.md`, paths of a
    clone; a pip user has the pages that ship, by `scaler --docs NAME`, and each name cited is one that ships."""
    with pytest.raises(SystemExit) as exited:
        load_worker_manager([type_name, "-h"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert not re.search(r"docs/[\w/]+\.md", text), text[:400]
    for name in re.findall(r"scaler --docs ([\w/]+)", text):
        find_page(name)  # ConfigError when no page has that name
