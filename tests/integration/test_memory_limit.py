"""A worker under a real cgroup v1 memory limit that the test creates: its heartbeats report the limit and the
source, and a task that allocates past it fails with `ProcessorOutOfMemoryError` naming the task's peak and the
limit, once, not retried on a worker of the same size, while the worker lives on and runs the next task; with a
bigger worker connected (a larger cgroup limit), the task that died on the small one finishes on the big one; with
a worker manager declaring bigger workers, the scheduler asks it for one and the task finishes there.

Needs root and a writable cgroup v1 memory hierarchy (/sys/fs/cgroup/memory); skipped with the reason otherwise.
The cgroups are removed when the test ends (after the workers' processes are gone)."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scaler import Client
from scaler.errors import ProcessorOutOfMemoryError
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from tests.integration.conftest import BIN_DIR, Launcher, ProcessWatch, session_security, wait_for
from tests.integration.manager_harness import start_manager

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
def memory_cgroups() -> Iterator[Callable[[int], Path]]:
    """Makes cgroups with a memory limit (and no swap past it); removes them when the test ends."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    made: list[Path] = []

    def make(limit_bytes: int) -> Path:
        directory = MEMORY_V1 / f"scaler-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"  # named for tests/reaping.py
        directory.mkdir()
        made.append(directory)
        (directory / "memory.limit_in_bytes").write_text(str(limit_bytes))
        swap = directory / "memory.memsw.limit_in_bytes"
        if swap.exists():  # no swapping past the limit: the kernel kills instead
            swap.write_text(str(limit_bytes))
        return directory

    try:
        yield make
    finally:
        for directory in made:
            procs = directory / "cgroup.procs"
            wait_for(lambda procs=procs: not procs.read_text().strip(), "the cgroup emptied", 30)
            directory.rmdir()


@pytest.fixture
def memory_cgroup(memory_cgroups: Callable[[int], Path]) -> Path:
    return memory_cgroups(LIMIT_BYTES)


def worker_in(cgroup: Path, scheduler: str, log: Path, processes: ProcessWatch) -> subprocess.Popen[bytes]:
    """A `scaler_worker` whose processes are all in `cgroup` (the shell moves itself in, then becomes the worker)."""
    command = f'echo $$ > {cgroup / "cgroup.procs"} && exec "$0" "$@"'
    with log.open("wb") as output:
        worker = subprocess.Popen(
            ["sh", "-c", command, str(BIN_DIR / "scaler_worker"), scheduler, "-his", "0.5", "-ll", "INFO"],
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    processes.add(worker)
    return worker


def stop(*workers: subprocess.Popen[bytes]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.wait(30)


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
            # a worker's status counts once its first heartbeat has brought its memory (not the registration's zeros)
            if isinstance(message, m.StatusSnapshot) and message.workers:
                if message.workers[0].status.memory_limit_source:
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
    worker = worker_in(memory_cgroup, addresses.scheduler, tmp_path / "worker.log", processes)
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
            assert "not retried: no worker with more than 400 MiB of memory is connected" in text, text
        assert (tmp_path / "worker.log").read_text().count(
            "out of memory: the processor"
        ) == 1  # failed once, not retried
    finally:
        stop(worker)


SMALL_BYTES, BIG_BYTES, TASK_MEBIBYTES = 400 << 20, 1536 << 20, 640


def allocate_when_told(started: str, go: str, mebibytes: int) -> str:
    """Say it started, wait for the test's word, allocate; answer the memory cgroup it ran in."""
    import time
    from pathlib import Path

    Path(started).touch()
    while not Path(go).exists():
        time.sleep(0.02)
    allocate(mebibytes)
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    return next(line.split(":", 2)[2] for line in lines if ":memory:" in line)


def worker_limits(monitor_address: str) -> set[int]:
    """The memory limits of the connected workers, as the scheduler's latest status shows them."""
    reader = FeedReader(monitor_address)
    try:
        for _ in range(20):
            message = reader.receive(1.0)
            if isinstance(message, m.StatusSnapshot):
                return {worker.status.memory_limit_bytes for worker in message.workers}
        return set()
    finally:
        reader.close()


def test_a_task_that_ran_out_of_memory_on_a_small_worker_finishes_on_a_bigger_one(
    memory_cgroups: Callable[[int], Path], launcher: Launcher, processes: ProcessWatch, tmp_path: Path
) -> None:
    """Two real workers, each in a cgroup of its own (400 MiB and 1.5 GiB); the task starts on the small one (the
    only one connected then), allocates 640 MiB once the big one's limit is known, dies there of the kernel's OOM
    killer and runs again on the big one, where it finishes; its story says why it moved.

    Checked by switching the mechanism off: with `(DISPATCHED, OUT_OF_MEMORY)` mapped to FINISH in
    `task_state.TRANSITIONS`, `future.result()` raises ProcessorOutOfMemoryError and this test fails."""
    small_group, big_group = memory_cgroups(SMALL_BYTES), memory_cgroups(BIG_BYTES)
    addresses, _, _ = launcher.stack(workers=0)
    small = worker_in(small_group, addresses.scheduler, tmp_path / "small.log", processes)
    big: subprocess.Popen[bytes] | None = None
    started, go = tmp_path / "started", tmp_path / "go"
    try:
        wait_for(lambda: worker_limits(addresses.monitor) == {SMALL_BYTES}, "the small worker's limit", 60)
        with Client(addresses.scheduler) as client:
            future = client.submit(allocate_when_told, str(started), str(go), TASK_MEBIBYTES)
            wait_for(started.exists, "the task started on the small worker", 60)
            big = worker_in(big_group, addresses.scheduler, tmp_path / "big.log", processes)
            wait_for(lambda: BIG_BYTES in worker_limits(addresses.monitor), "the big worker's limit", 60)
            go.touch()
            ran_in = future.result(timeout=90)
            assert ran_in == "/" + big_group.name, ran_in
            story = str(future.story())
            assert "out of memory on worker" in story and "retried on a worker with more memory" in story, story
        assert (tmp_path / "small.log").read_text().count("out of memory: the processor") == 1
        assert small.poll() is None, "the small worker itself died"
    finally:
        stop(small, *([big] if big is not None else []))


def test_a_task_that_ran_out_of_memory_makes_the_manager_with_bigger_workers_start_one(
    memory_cgroups: Callable[[int], Path], launcher: Launcher, processes: ProcessWatch, tmp_path: Path
) -> None:
    """A small worker in a 400 MiB cgroup and a native worker manager whose workers declare `memory=2GiB`, with no
    worker yet (the default `vanilla` policy, which reads no capabilities, sees one task on one worker and asks for
    none). The task dies on the small worker; the scaling hook asks the manager for one worker, and the task
    finishes there.

    Checked by switching the mechanism off: with `make_room_for_outgrown` returning its target, the manager is never
    asked and `future.result()` times out; with `(DISPATCHED, OUT_OF_MEMORY)` mapped to FINISH, it raises
    ProcessorOutOfMemoryError."""
    small_group = memory_cgroups(SMALL_BYTES)
    addresses, _, _ = launcher.stack(workers=0)
    small = worker_in(small_group, addresses.scheduler, tmp_path / "small.log", processes)
    manager = start_manager(launcher, addresses, "bigmem", "-pwc", "memory=2GiB", "-mw", "1")
    go = tmp_path / "go"
    go.touch()
    try:
        wait_for(lambda: worker_limits(addresses.monitor) == {SMALL_BYTES}, "the small worker's limit", 60)
        manager.wait_for_log("registered")
        with Client(addresses.scheduler) as client:
            future = client.submit(allocate_when_told, str(tmp_path / "started"), str(go), TASK_MEBIBYTES)
            assert future.result(timeout=90) != "/" + small_group.name
            story = str(future.story())
            assert "worker manager bigmem declares workers of 2 GiB" in story, story
        assert (tmp_path / "small.log").read_text().count("out of memory: the processor") == 1
    finally:
        stop(small)
