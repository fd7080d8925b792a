"""Peers cut off by the network, then healed (#32 item 2): each test makes its own network namespace joined to
this one by a veth pair on TEST-NET-2 addresses (198.51.100.200/30 and up: 192.0.2.0/24 is this machine's own
network here, and the fake cloud takes 198.51.100.0/27 and 203.0.113.0/24), runs the cut-off peer inside it, and
partitions it with `iptables` DROP rules that live in that namespace only (deleting the namespace removes them
and the veth pair, even when the test fails). The connections stay open while packets are dropped, so only
timeouts can notice.

- a worker partitioned from the scheduler longer than the worker timeout: its tasks run elsewhere, after the
  heal nothing is delivered twice, it registers again, and no task runs a third time;
- a client partitioned for less than its timeouts: every result reaches it, once;
- a worker cut off from the object storage only: its task fails naming the storage, and does not hang.

Needs root, `ip` and `iptables`; skipped with the reason otherwise.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scaler import Client
from scaler.errors import ObjectStorageException
from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import (
    BIN_DIR,
    DEADLINE_SECONDS,
    Launcher,
    ProcessWatch,
    monitor,
    probe_scheduler,
    process_tree,
    wait_for,
)
from tests.integration.test_frozen_peers import events, run_once, starts

pytestmark = pytest.mark.integration


def run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, timeout=30)


@dataclass
class Namespace:
    name: str
    host_ip: str  #: this namespace's end of the veth pair (where services listen)
    inside_ip: str

    def exec(self, *command: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *command]

    def cut(self, *match: str) -> None:
        """Drop every packet in and out of the namespace (or only those matching `match`, e.g. a port)."""
        run(*self.exec("iptables", "-A", "OUTPUT", *match, "-j", "DROP"))
        run(*self.exec("iptables", "-A", "INPUT", *[a.replace("--dport", "--sport") for a in match], "-j", "DROP"))

    def heal(self) -> None:
        run(*self.exec("iptables", "-F"))


def namespaces_unavailable() -> str:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    missing = [tool for tool in ("ip", "iptables") if shutil.which(tool) is None]
    return f"needs {' and '.join(missing)}" if missing else ""


@pytest.fixture
def netns() -> Iterator[Any]:
    """`make(first)`: a namespace on 198.51.100.FIRST/30 (host end FIRST+1, inside FIRST+2, its default route
    through this namespace). Every namespace, its processes and its rules are gone afterwards."""
    reason = namespaces_unavailable()
    if reason:
        pytest.skip(reason)
    made: list[Namespace] = []

    def make(first: int) -> Namespace:
        index = len(made)
        name, host_end, inside_end = f"scaler{os.getpid()}n{index}", f"sc{os.getpid()}h{index}", "eth0"
        try:
            run("ip", "netns", "add", name)
        except subprocess.CalledProcessError as error:
            pytest.skip(f"cannot create a network namespace here: {error.stderr.decode().strip()}")
        namespace = Namespace(name, f"198.51.100.{first + 1}", f"198.51.100.{first + 2}")
        taken = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        if f" {namespace.host_ip}/" in taken:
            pytest.fail(f"{namespace.host_ip} is already in use on this machine (ip -o addr)")
        made.append(namespace)
        run("ip", "link", "add", host_end, "type", "veth", "peer", "name", inside_end, "netns", name)
        run("ip", "addr", "add", f"{namespace.host_ip}/30", "dev", host_end)
        run("ip", "link", "set", host_end, "up")
        run("ip", "-n", name, "addr", "add", f"{namespace.inside_ip}/30", "dev", inside_end)
        run("ip", "-n", name, "link", "set", inside_end, "up")
        run("ip", "-n", name, "link", "set", "lo", "up")
        run("ip", "-n", name, "route", "add", "default", "via", namespace.host_ip)
        return namespace

    try:
        yield make
    finally:
        for namespace in made:
            pids = subprocess.run(["ip", "netns", "pids", namespace.name], capture_output=True, text=True).stdout
            for pid in pids.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            subprocess.run(["ip", "netns", "del", namespace.name], capture_output=True)
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert not [n for n in made if n.name in listed], f"network namespaces left behind: {listed}"


def start_in(namespace: Namespace, processes: ProcessWatch, log: Path, command: str, *args: str) -> Any:
    with open(log, "wb") as output:
        popen = subprocess.Popen(
            namespace.exec(str(BIN_DIR / command), *args), stdin=subprocess.DEVNULL, stdout=output, stderr=output
        )
    return processes.add(popen)


def stack_on(host_ip: str, launcher: Launcher, *scheduler_args: str) -> tuple[str, str, str]:
    """Object storage and scheduler in this namespace, listening on `host_ip`: (scheduler, storage, monitor)."""
    base = free_tcp_port_block(3)
    scheduler, storage, status = (f"tcp://{host_ip}:{base + offset}" for offset in range(3))
    launcher.start("scaler_object_storage_server", storage, "-ll", "INFO")
    launcher.start("scaler_scheduler", scheduler, "-osa", storage, "-ma", status, "-ll", "INFO", *scheduler_args)
    probe_scheduler(scheduler)
    return scheduler, storage, status


@pytest.mark.timeout(120)
def test_a_worker_partitioned_past_the_worker_timeout_is_replaced_and_comes_back_without_duplicates(
    netns: Any, launcher: Launcher, processes: ProcessWatch, tmp_path: Path
) -> None:
    """Checked with the mechanism off: without the worker's re-registration (its link with `register_again`
    False) the healed worker exits instead of reappearing, and the wait for it in the status fails."""
    cut_off = netns(200)
    scheduler, _, status = stack_on(cut_off.host_ip, launcher, "-wt", "3")
    launcher.cluster(scheduler, 1, "-his", "0.5")
    pool = start_in(cut_off, processes, tmp_path / "pool.log", "scaler_cluster", "-n", "1", scheduler, "-his", "0.5")
    marker = tmp_path / "events"
    delivered: Counter[int] = Counter()
    lock = threading.Lock()

    def count(future: Any) -> None:
        with lock:
            delivered[future.result()] += 1

    with monitor(status) as next_snapshot:
        joined = next_snapshot(lambda s: len(s.workers) == 2)
        inside = {process.pid for process in process_tree(pool.pid)}
        (agent,) = [worker.pid for worker in joined.workers if worker.pid in inside]
        with Client(address=scheduler) as client:
            futures = [client.submit(run_once, str(marker), key, 1.5) for key in range(6)]
            for future in futures:
                future.add_done_callback(count)
            wait_for(lambda: any(a == agent for event, _, a in events(marker)), "a task on the cut-off worker")
            try:
                cut_off.cut()
                next_snapshot(lambda s: all(w.pid != agent for w in s.workers))  # dropped
                assert sorted(f.result(timeout=DEADLINE_SECONDS) for f in futures) == list(range(6))
            finally:
                cut_off.heal()
            next_snapshot(lambda s: any(w.pid == agent for w in s.workers) and len(s.workers) == 2)
            more = [client.submit(run_once, str(marker), key, 0.1) for key in range(6, 8)]
            for future in more:
                future.add_done_callback(count)
            assert sorted(f.result(timeout=DEADLINE_SECONDS) for f in more) == [6, 7]
            # snapshots queue up in the subscription: one from before the last two tasks also has nothing running
            settled = next_snapshot(lambda s: s.scheduler.running == 0 and s.scheduler.queued == 0
                                    and s.scheduler.succeeded >= 8)  # fmt: skip
    wait_for(lambda: sum(delivered.values()) == 8, "every result's callback")
    assert delivered == Counter(range(8)), "a result was delivered twice"
    assert settled.scheduler.succeeded == 8, f"a stale result was counted: {settled.scheduler}"
    assert max(starts(marker).values()) <= 2, f"a task ran a third time: {starts(marker)}"


CLIENT_SCRIPT = """
import sys
from collections import Counter
from scaler import Client

def slow_square(x):
    import time
    time.sleep(2)
    return x * x

with Client(address=sys.argv[1], timeout_seconds=15, heartbeat_interval_seconds=0.5) as client:
    seen = Counter()
    futures = [client.submit(slow_square, x) for x in range(4)]
    for future in futures:
        future.add_done_callback(lambda f: seen.update([f.result()]))
    print("submitted", flush=True)
    print("results", [f.result(timeout=60) for f in futures], flush=True)
    print("deliveries", sorted(seen.elements()), flush=True)
"""


@pytest.mark.timeout(120)
def test_a_client_partitioned_for_less_than_its_timeouts_gets_every_result_once(
    netns: Any, launcher: Launcher, processes: ProcessWatch
) -> None:
    """Client timeout 15 s on both sides, the partition about 6 s, over which all four results wait. Checked with
    the mechanism off: with the scheduler's client timeout at 3 s (`-ct 3`) the scheduler drops the client during
    the partition and cancels its tasks, and the wait for four successes fails."""
    cut_off = netns(204)
    scheduler, _, status = stack_on(cut_off.host_ip, launcher, "-ct", "15")
    launcher.cluster(scheduler, 2, "-his", "0.5")
    script = subprocess.Popen(
        cut_off.exec(sys.executable, "-c", CLIENT_SCRIPT, scheduler),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    processes.add(script)
    assert script.stdout is not None
    with monitor(status) as next_snapshot:
        next_snapshot(lambda s: len(s.workers) == 2)
        assert script.stdout.readline().startswith("submitted"), "the client did not start"
        try:
            cut_off.cut()
            # the results wait for it while it is cut off, and the scheduler keeps it
            waited = next_snapshot(lambda s: s.scheduler.succeeded == 4)
            assert len(waited.clients) == 1, "the scheduler dropped the cut-off client"
            next_snapshot(lambda s: s.time - waited.time > 2)
            assert len(next_snapshot().clients) == 1, "the scheduler dropped the cut-off client"
        finally:
            cut_off.heal()
        output, _ = script.communicate(timeout=DEADLINE_SECONDS)
        assert script.returncode == 0, output
        assert "results [0, 1, 4, 9]" in output and "deliveries [0, 1, 4, 9]" in output, output
        settled = next_snapshot(lambda s: not s.clients)
    assert settled.scheduler.succeeded == 4 and settled.scheduler.canceled == 0, settled.scheduler


def payload_length(data: bytes) -> int:
    return len(data)


def payload_of(length: int) -> bytes:
    return b"z" * length


@pytest.mark.timeout(150)
def test_a_worker_cut_off_from_the_object_storage_only_fails_its_task_naming_the_storage(
    netns: Any, launcher: Launcher, processes: ProcessWatch, tmp_path: Path
) -> None:
    """The worker still hears the scheduler; only its packets to and from the storage port are dropped. The task
    must end (the processor's storage request times out: after 4 s of silence here, `--storage-timeout-seconds`;
    60 s by default) with an error naming the storage. The task has to go to storage: it returns 1 MB, over the inline
    limit, which its processor must store. (An argument of 1 MB would not do: the namespace shares the host's
    /dev/shm, so the worker is on the storage's host and maps a large argument from the segment directory by name,
    without asking the storage; docs/architecture.md "Objects in shared memory".) Checked with the mechanism off:
    with the storage connection's timeout disabled the future never completes and the test fails on its own
    deadline."""
    cut_off = netns(208)
    scheduler, storage, status = stack_on(cut_off.host_ip, launcher)
    start_in(cut_off, processes, tmp_path / "pool.log", "scaler_cluster", "-n", "1", scheduler, "-his", "0.5",
             "--storage-timeout-seconds", "4")  # fmt: skip
    with monitor(status) as next_snapshot:
        next_snapshot(lambda s: len(s.workers) == 1)
    port = storage.rsplit(":", 1)[1]
    with Client(address=scheduler) as client:
        assert client.submit(payload_length, b"x").result(timeout=DEADLINE_SECONDS) == 1
        try:
            cut_off.cut("-p", "tcp", "--dport", port)
            future = client.submit(payload_of, 1_000_000)
            with pytest.raises(ObjectStorageException, match="object storage at") as raised:
                future.result(timeout=110)
        finally:
            cut_off.heal()
        assert storage in str(raised.value)
        assert client.submit(payload_of, 1_000_000).result(timeout=DEADLINE_SECONDS) == b"z" * 1_000_000
        assert client.submit(payload_length, b"z" * 1_000_000).result(timeout=DEADLINE_SECONDS) == 1_000_000
