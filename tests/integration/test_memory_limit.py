"""A worker under a real cgroup v1 memory limit that the test creates: its heartbeats report the limit and the
source, and a task that allocates past it fails with `ProcessorOutOfMemoryError` naming the task's peak and the
limit, once, not retried, while the worker lives on and runs the next task.

Needs root and a writable cgroup v1 memory hierarchy (/sys/fs/cgroup/memory); skipped with the reason otherwise.
The cgroup is removed when the test ends (after the worker's processes are gone)."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler import Client
from scaler.errors import ProcessorOutOfMemoryError
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from tests.integration.conftest import BIN_DIR, Launcher, ProcessWatch, session_security, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MEMORY_V1 = Path("/sys/fs/cgroup/memory")
LIMIT_BYTES = 400 << 20


def _skip_reason() -> str:
    if os.geteuid() != 0:
        return "creating a memory cgroup needs root"
    if not (MEMORY_V1 / "cgroup.procs").exists():
        return f"no cgroup v1 memory hierarchy at {MEMORY_V1}"
    if not os.access(MEMORY_V1, os.W_OK):
        return f"{MEMORY_V1} is not writable here"
    return ""


@pytest.fixture
def memory_cgroup() -> Iterator[Path]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    directory = MEMORY_V1 / f"scaler-test-{uuid.uuid4().hex[:8]}"
    directory.mkdir()
    try:
        (directory / "memory.limit_in_bytes").write_text(str(LIMIT_BYTES))
        swap = directory / "memory.memsw.limit_in_bytes"
        if swap.exists():  # no swapping past the limit: the kernel kills instead
            swap.write_text(str(LIMIT_BYTES))
        yield directory
    finally:
        wait_for(lambda: not (directory / "cgroup.procs").read_text().strip(), "the cgroup emptied", 30)
        directory.rmdir()


def allocate(mebibytes: int) -> int:
    """Grow by 16 MiB steps (touched pages, so they are charged), slowly enough for the agent's samples."""
    import time

    held = []
    for _ in range(mebibytes // 16):
        held.append(bytearray(16 << 20))
        time.sleep(0.05)
    return len(held)


def latest_worker(monitor_address: str) -> m.WorkerSummary | None:
    reader = FeedReader(monitor_address, security=session_security("client"))  # the feed is secure by default
    try:
        for _ in range(20):
            message = reader.receive(1.0)
            if isinstance(message, m.StatusSnapshot) and message.workers:
                return message.workers[0]
        return None
    finally:
        reader.close()


def test_a_task_past_the_cgroup_limit_fails_as_out_of_memory_and_is_not_retried(
    memory_cgroup: Path, launcher: Launcher, processes: ProcessWatch, tmp_path: Path
) -> None:
    """Checked by switching the mechanism off: with `MemoryWatch.verdict` returning "" the task fails with a bare
    ProcessorDiedError and this test fails; with the cgroup limit not read (`find_memory_limit` returning the
    machine's) the heartbeat assertions fail."""
    addresses, _, _ = launcher.stack(workers=0)
    log = (tmp_path / "worker.log").open("wb")
    command = f'echo $$ > {memory_cgroup / "cgroup.procs"} && exec "$0" "$@"'
    worker = subprocess.Popen(
        ["sh", "-c", command, str(BIN_DIR / "scaler_worker"), addresses.scheduler, "-his", "0.5", "-ll", "INFO"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    processes.add(worker)
    try:
        worker_summary = wait_for(lambda: latest_worker(addresses.monitor), "the worker's status", 60)
        assert worker_summary.status.memory_limit_bytes == LIMIT_BYTES
        assert worker_summary.status.memory_limit_source == "cgroup v1"
        assert 0 < worker_summary.status.memory_bytes < LIMIT_BYTES

        with Client(addresses.scheduler) as client:
            future = client.submit(allocate, 2000)
            with pytest.raises(ProcessorOutOfMemoryError) as raised:
                future.result(timeout=90)
            text = str(raised.value)
            assert "out of memory" in text and "OOM killer" in text, text
            assert "limit: 400.0 MiB (cgroup v1)" in text, text
            assert "peak memory seen: " in text and "not sampled" not in text, text
            assert worker.poll() is None, "the worker itself died"
            assert client.submit(allocate, 32).result(timeout=60) == 2  # the worker lives on
        assert (tmp_path / "worker.log").read_text().count(
            "out of memory: the processor"
        ) == 1  # failed once, not retried
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()
