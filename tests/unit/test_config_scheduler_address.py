"""#34 item 3: in a file with a [scheduler] section, a section that connects to the scheduler (a worker manager
entry, [cluster], [worker]) and gives no `scheduler_address` takes the scheduler's address, for `scaler FILE`
(and so `scaler_simulate_policy --config FILE`, which reads files the same way) and for `<command> -c FILE`.

Checked by switching it off: with `_inherit_scheduler_address` returning its section unchanged, every test
here that expects an inherited address fails with "missing setting scheduler_address".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.config.loader import ConfigError, connectable_address, load_launcher_file, load_section, load_worker_manager
from scaler.config.sections import ClusterConfig, WorkerConfig

pytestmark = pytest.mark.usefixtures("no_scaler_environment")

SCHEDULER = "tcp://127.0.0.1:8516"
MANAGER = '[[worker_manager]]\ntype = "baremetal_native"\nworker_manager_id = "local"\n'


def stack(tmp_path: Path, text: str) -> str:
    path = tmp_path / "stack.toml"
    path.write_text(text)
    return str(path)


def with_scheduler(bind_address: str = SCHEDULER, rest: str = MANAGER) -> str:
    return f'[scheduler]\nbind_address = "{bind_address}"\n\n{rest}'


def test_a_manager_without_an_address_takes_the_scheduler_s(tmp_path: Path) -> None:
    (manager,) = load_launcher_file(stack(tmp_path, with_scheduler())).worker_managers
    assert manager.scheduler_address == SCHEDULER


@pytest.mark.parametrize("host", ["0.0.0.0", "*"])
def test_a_wildcard_bind_address_is_reached_on_this_machine(tmp_path: Path, host: str) -> None:
    (manager,) = load_launcher_file(stack(tmp_path, with_scheduler(f"tcp://{host}:9000"))).worker_managers
    assert manager.scheduler_address == "tcp://127.0.0.1:9000"


def test_the_1_x_key_of_the_scheduler_address_counts_too(tmp_path: Path) -> None:
    text = f'[scheduler]\nscheduler_address = "{SCHEDULER}"\n\n{MANAGER}'
    (manager,) = load_launcher_file(stack(tmp_path, text)).worker_managers
    assert manager.scheduler_address == SCHEDULER


def test_an_address_the_manager_gives_is_kept(tmp_path: Path) -> None:
    own = MANAGER + 'scheduler_address = "tcp://10.0.0.5:8516"\n'
    (manager,) = load_launcher_file(stack(tmp_path, with_scheduler(rest=own))).worker_managers
    assert manager.scheduler_address == "tcp://10.0.0.5:8516"


def test_the_environment_overrides_the_inherited_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALER_BAREMETAL_NATIVE_SCHEDULER_ADDRESS", "tcp://10.0.0.6:8516")
    (manager,) = load_launcher_file(stack(tmp_path, with_scheduler())).worker_managers
    assert manager.scheduler_address == "tcp://10.0.0.6:8516"


def test_a_scheduler_address_from_the_environment_reaches_the_managers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALER_SCHEDULER_BIND_ADDRESS", "tcp://0.0.0.0:9100")
    text = f'[scheduler]\npolicy_content = "allocate=even_load; scaling=no"\n\n{MANAGER}'
    (manager,) = load_launcher_file(stack(tmp_path, text)).worker_managers
    assert manager.scheduler_address == "tcp://127.0.0.1:9100"


def test_without_a_scheduler_section_the_address_is_missing_and_the_message_says_how_to_give_it(
    tmp_path: Path,
) -> None:
    path = stack(tmp_path, MANAGER)
    with pytest.raises(ConfigError, match="missing setting scheduler_address") as refused:
        load_launcher_file(path)
    assert f"by a [scheduler] section in {path}" in str(refused.value)


def test_scaler_worker_manager_c_file_takes_the_scheduler_address(tmp_path: Path) -> None:
    path = stack(tmp_path, with_scheduler("tcp://0.0.0.0:9200"))
    assert load_worker_manager(["-c", path]).scheduler_address == "tcp://127.0.0.1:9200"
    assert load_worker_manager(["baremetal_native", "-c", path]).scheduler_address == "tcp://127.0.0.1:9200"
    given = load_worker_manager(["baremetal_native", "-c", path, "tcp://10.0.0.7:1"])
    assert given.scheduler_address == "tcp://10.0.0.7:1"


def test_cluster_and_worker_sections_take_it_too(tmp_path: Path) -> None:
    path = stack(tmp_path, with_scheduler(rest="[cluster]\nnum_of_workers = 2\n\n[worker]\nworker_type = 'X'\n"))
    cluster = load_section(ClusterConfig, ["-c", path], prog="scaler_cluster", toml_sections=["cluster"])
    worker = load_section(WorkerConfig, ["-c", path], prog="scaler_worker", toml_sections=["worker"])
    assert cluster.scheduler_address == worker.scheduler_address == SCHEDULER


@pytest.mark.parametrize(
    ("bound", "connectable"),
    [
        ("tcp://0.0.0.0:8516", "tcp://127.0.0.1:8516"),
        ("tcp://*:8516", "tcp://127.0.0.1:8516"),
        ("tcp://10.1.2.3:8516", "tcp://10.1.2.3:8516"),
        ("ipc:///tmp/scheduler.sock", "ipc:///tmp/scheduler.sock"),
    ],
)
def test_connectable_address(bound: str, connectable: str) -> None:
    assert connectable_address(bound) == connectable
