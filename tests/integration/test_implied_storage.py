"""#38 finding 4: the stack file docs/guide/clusters.md shows (a [scheduler] naming an object storage address, no
[object_storage_server]), saved as a file, runs: `scaler FILE` starts object storage at that address, and a
client's first call works (every call failed after 10 s, for a storage server nobody started). A file that names
storage elsewhere, or where something listens already, is left as it is.

Checked by switching the mechanism off: with `with_implied_storage` returning the file unchanged, the client's map
fails with "object storage at ... is not reachable" and the test fails. It also checks that the launcher says each
child once (it logged "started X (pid N)" and printed "scaler: X at ... (pid N)", and object storage said where it
listens twice)."""

from __future__ import annotations

import dataclasses
import re
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from scaler import Client
from scaler.cluster.implied_storage import with_implied_storage
from scaler.config.loader import LauncherFile
from scaler.config.sections import ObjectStorageServerConfig, SchedulerConfig
from tests.integration.conftest import (
    BIN_DIR,
    COLD_START_SECONDS,
    ProcessWatch,
    free_addresses,
    probe_scheduler,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "clusters.md"


def guide_stack_file() -> str:
    """The first TOML block of docs/guide/clusters.md, as a reader copies it."""
    blocks = re.findall(r"```toml\n(.*?)```", GUIDE.read_text(), flags=re.S)
    assert blocks, "docs/guide/clusters.md shows a stack file"
    return str(blocks[0])


def file_of(scheduler: SchedulerConfig, storage: ObjectStorageServerConfig | None = None) -> LauncherFile:
    return LauncherFile(object_storage_server=storage, scheduler=scheduler, worker_managers=(), gui=None)


def test_only_a_local_free_address_without_a_storage_section_implies_a_server() -> None:
    addresses = free_addresses()
    scheduler = SchedulerConfig(bind_address=addresses.scheduler, object_storage_address=addresses.object_storage,
                                object_storage_max_memory=1 << 30)  # fmt: skip
    implied, line = with_implied_storage(file_of(scheduler))
    assert line is not None and addresses.object_storage in line
    assert implied.object_storage_server is not None
    assert implied.object_storage_server.bind_address == addresses.object_storage
    assert implied.object_storage_server.max_memory == 1 << 30, "the scheduler's budget goes to its server"
    assert implied.scheduler is not None and implied.scheduler.object_storage_max_memory is None
    given = ObjectStorageServerConfig(bind_address=addresses.object_storage)
    assert with_implied_storage(file_of(scheduler, given)) == (file_of(scheduler, given), None)
    elsewhere = dataclasses.replace(scheduler, object_storage_address="tcp://192.0.2.7:8517")  # TEST-NET: not ours
    assert with_implied_storage(file_of(elsewhere))[1] is None
    host, port = addresses.object_storage.removeprefix("tcp://").rsplit(":", 1)
    with socket.create_server((host, int(port))):  # something listens there already
        assert with_implied_storage(file_of(scheduler))[1] is None


def test_the_guides_stack_file_runs_as_written(tmp_path: Path, processes: ProcessWatch) -> None:
    addresses = free_addresses()
    text = guide_stack_file()
    assert "[object_storage_server]" not in text and "object_storage_address" in text
    text = text.replace("tcp://127.0.0.1:8516", addresses.scheduler).replace(
        "tcp://127.0.0.1:8517", addresses.object_storage
    )
    (tmp_path / "stack.toml").write_text(text)
    stack = processes.add(
        subprocess.Popen(
            [str(BIN_DIR / "scaler"), "stack.toml"], cwd=tmp_path, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
    )  # fmt: skip
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(stack.stdout or ()), daemon=True)
    reader.start()
    probe_scheduler(addresses.scheduler, COLD_START_SECONDS, stack)
    with Client(address=addresses.scheduler, timeout_seconds=30) as client:
        assert client.map(pow, [2, 3], [10, 2]) == [1024, 9]
    # the manager is announced once the scheduler's status feed shows it registered (up to a second after the
    # tasks could run): a script waits for the line, as this test does
    wait_for(lambda: any("scaler: worker manager 'local'" in line for line in said), "the manager's line")
    processes.remember()
    stack.send_signal(signal.SIGTERM)
    stack.wait(timeout=60)
    reader.join(timeout=30)
    output = "".join(said)
    assert stack.returncode == 0, output
    assert f"[scheduler] object_storage_address is {addresses.object_storage}, where nothing listens" in output
    assert output.count("object storage server listening on") == 1, "said once (it was said twice)"
    for name in ("object storage server", "scheduler", "worker manager 'local'"):  # printed once each, not also logged
        assert output.count(f"scaler: {name}") == 1 and f"started {name}" not in output, output
