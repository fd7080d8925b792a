"""One copy of each object per host, with real processes: host caches (object_storage/host_cache/).

A "host" here is a mount and UTS namespace of this machine with its own tmpfs on /dev/shm, its own host name and its
own temporary directory: the storage server on one, two `scaler_cluster`s of two workers on two others, the scheduler
and the client in the test's own. A process of one host does not see another's /dev/shm, so `segment_sight.sees` says
"another host", as it does across machines (hosts-on-one-machine.md); their links are loopback, so the bytes the
storage server sent are read from its established TCP sockets (`ss`'s bytes_acked), not from shaped links.

- N processors of each of two hosts reading one object: the storage server sends it about once (the second host
  fetches it from the first host's cache), and each host's processors map the one file of its cache
  (/proc/self/maps).
- A result reported done survives its host: reported, then both worker hosts killed (every process of their
  namespaces) and another started, it still reads back (made again there from its task when its upload had not been
  stored: held_results.py).
- A peer with other keys than the workers' gets nothing from a cache as a worker (a client's key is let in to read
  its own results only: tests/integration/test_results_read_from_their_host.py); the workers' keys get the object.
- A host's cache that dies (killed) is replaced: its workers find the route again and their tasks go on.
- A source the storage server names that nobody answers at (a host gone, or firewalled off): the fetch goes
  elsewhere, said once in the fetching cache's log, and the tasks read the object.
- Results: a client's gather reads them several at once, as they are done; a host's two large results made at once
  are uploaded by its cache one after the other, on one connection.
- A broadcast is seen (issue 74 item 8): the status feed's storage names both hosts' caches, the object held by both
  and sent once out of the storage server, the bytes that went host to host; `scaler_top` (in tmux) shows its row,
  `/metrics` its series, and the dashboard (headless chromium) its hosts and the object's row.

Checked by hand with each mechanism off:
- the route off (`--host-cache False` for the clusters): the storage server sent the object once per processor (four
  copies), the arrays lay in each processor's heap: `test_the_hosts_fetch_an_object_about_once_and_map_one_copy` fails;
- host to host off (`HostLedger.source` naming no other host): the storage server sent the object once per host (two
  copies): the same test fails;
- rule C4 off (`StorageService._settled` answering a peer's put at once and asking no upload): the result is lost with
  its host: `test_a_result_reported_done_survives_its_host` fails (MissingObjects); and with the scheduler not making a
  lost result again (`TaskLifecycle.fates_told` doing nothing), it fails too (the read waits past its timeout);
- the fallback off (`Upstream._from_another_host` not catching a failed source): the fetch fails and so do the
  tasks: `test_a_source_that_cannot_be_reached_...` fails;
- the agent's check of its cache off (`WorkerAgent._check_cache` returning at once): no other cache starts:
  `test_a_cache_that_dies_is_replaced_...` fails;
- the cache's authenticator letting every key in (`CacheSecurity.callback` returning True):
  `test_a_peer_without_the_workers_keys_gets_nothing_from_a_cache` fails;
- the gather's read ahead off (`Session.reading_each` not calling `ahead.each`; these tests read at the storage server,
  as a client that cannot reach the workers' hosts does): the results came over one connection:
  `test_a_client_gathers_results_several_at_once_as_they_are_done` fails; the large uploads' lane off (`Upstream.submit`
  putting every job on the shared queue): each result went up on a connection of its own:
  `test_a_hosts_large_results_made_at_once_are_uploaded_one_after_the_other` fails;
- the caches' reports off (`CacheGlue.due_report` giving none): no host row, the object held by no host:
  `test_a_broadcast_shows_in_the_status_feed_scaler_top_and_metrics` and
  `test_the_dashboard_shows_where_a_broadcast_went` fail; the scheduler not passing on what its storage info says
  (ShellStats' storage left empty): the first fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from scaler import Client
from scaler.client.holder_reads import SourceChoice
from scaler.errors import ScalerError
from scaler.io.address import free_tcp_port_block
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.protocol import messages as m
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import ObjectCopies, SourceRequest, StorageTraffic
from scaler.scheduler.server import STATS_SECONDS
from scaler.security.curve import CurveSecurity
from tests.integration.conftest import (
    BIN_DIR,
    COLD_START_SECONDS,
    DEADLINE_SECONDS,
    Addresses,
    ProcessWatch,
    free_addresses,
    monitor,
    probe_scheduler,
    session_security,
    wait_for,
    wait_for_workers,
)
from tests.integration.test_dashboard import card, headless_chromium, needs_browser, screenshot, texts
from tests.integration.test_scaler_top import Terminal

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.xdist_group("host_caches")]

MiB = 1024 * 1024
ARRAY_ITEMS = 2_500_000  #: 20 MB of float64
HOSTS = ("cache-host-a", "cache-host-b")


def _missing() -> str:
    if os.geteuid() != 0:
        return "needs root: each host is a mount namespace with its own tmpfs on /dev/shm"
    missing = [program for program in ("unshare", "nsenter", "ss", "mount") if shutil.which(program) is None]
    return f"needs {', '.join(missing)}" if missing else ""


# ---------------------------------------------------------------- what runs in the processors


def mapping_of(array: Any) -> str:
    """The file the memory of `array` is mapped from, as /proc/self/maps names it ("" for anonymous memory)."""
    address = array.__array_interface__["data"][0]
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            start, end = (int(part, 16) for part in fields[0].split("-"))
            if start <= address < end:
                return fields[5].strip() if len(fields) == 6 else ""
    return ""


def where_read(array: Any, pause: float) -> tuple[str, str, float]:
    """The host that ran the task, the file its argument is mapped from, and the argument's sum."""
    time.sleep(pause)  # the tasks of one map overlap, so that every processor of both hosts takes some
    return socket.gethostname(), mapping_of(array), float(array.sum())


def sized_result(size: int, pause: float) -> bytes:
    time.sleep(pause)  # the results of a map are done while the client reads the first ones
    return os.urandom(size)


def large_result(size: int) -> tuple[str, bytes]:
    return socket.gethostname(), os.urandom(size)


def large_result_after(size: int, pause: float) -> tuple[str, bytes]:
    time.sleep(pause)  # every processor of both hosts takes one, and they make their results at the same moment
    return socket.gethostname(), os.urandom(size)


# ---------------------------------------------------------------- the stack


@dataclass
class Stack:
    addresses: Addresses
    storage_port: int
    hosts: dict[str, subprocess.Popen[bytes]]
    logs: Path

    def bytes_sent_by_storage(self) -> int:
        """What the storage server sent on its open connections (TCP bytes acknowledged)."""
        listing = subprocess.run(
            ["ss", "-tinH", "state", "established", f"( sport = :{self.storage_port} )"],
            capture_output=True, text=True, check=True, timeout=DEADLINE_SECONDS,
        ).stdout  # fmt: skip
        return sum(int(count) for count in re.findall(r"bytes_acked:(\d+)", listing))

    def client_connections_that_received(self, pid: int, at_least: int) -> int:
        """How many of this process's connections to the storage server received at least `at_least` bytes."""
        listing = subprocess.run(
            ["ss", "-tinpH", "state", "established", f"( dport = :{self.storage_port} )"],
            capture_output=True, text=True, check=True, timeout=DEADLINE_SECONDS,
        ).stdout  # fmt: skip
        count = 0
        for entry in re.split(r"\n(?=\S)", listing):  # a socket's line, then its details indented
            received = re.search(r"bytes_received:(\d+)", entry)
            if f"pid={pid}," in entry and received is not None and int(received.group(1)) >= at_least:
                count += 1
        return count

    def cache_upload_bytes(self) -> dict[tuple[str, str], int]:
        """What each connection of the hosts' caches to the storage server sent (TCP bytes acknowledged), by (host,
        the connection's local address)."""
        hosts = {os.readlink(f"/proc/{popen.pid}/ns/mnt"): host for host, popen in self.hosts.items()}
        listing = subprocess.run(
            ["ss", "-tinpH", "state", "established", f"( dport = :{self.storage_port} )"],
            capture_output=True, text=True, check=True, timeout=DEADLINE_SECONDS,
        ).stdout  # fmt: skip
        sent: dict[tuple[str, str], int] = {}
        for entry in re.split(r"\n(?=\S)", listing):  # a socket's line, then its details indented
            owner, acked = re.search(r"pid=(\d+),", entry), re.search(r"bytes_acked:(\d+)", entry)
            if owner is None or acked is None:
                continue
            try:
                process = psutil.Process(int(owner.group(1)))
                host = hosts.get(os.readlink(f"/proc/{process.pid}/ns/mnt"))
                if host is not None and "scaler.object_storage.host_cache" in " ".join(process.cmdline()):
                    sent[(host, entry.split()[2])] = int(acked.group(1))
            except (OSError, psutil.Error):
                continue
        return sent

    def cache_address(self, host: str) -> str:
        """The address the host's cache wrote in its home (read inside the host's mount namespace)."""
        namespace = f"--mount=/proc/{self.hosts[host].pid}/ns/mnt"
        found = subprocess.run(
            ["nsenter", namespace, "sh", "-c", "cat /dev/shm/scaler-cache-*/address"],
            capture_output=True, text=True, timeout=DEADLINE_SECONDS,
        )  # fmt: skip
        return found.stdout.strip()

    def cache_logs(self) -> list[str]:
        """The lines of the hosts' caches' logs (read inside each host's mount namespace)."""
        lines: list[str] = []
        for popen in self.hosts.values():
            namespace = f"--mount=/proc/{popen.pid}/ns/mnt"
            shown = subprocess.run(
                ["nsenter", namespace, "sh", "-c", "cat /dev/shm/scaler-cache-*/cache.log"],
                capture_output=True, text=True, timeout=DEADLINE_SECONDS,
            )  # fmt: skip
            lines += shown.stdout.splitlines()
        return lines

    def kill_cache(self, host: str) -> None:
        """The host's cache process alone (SIGKILL)."""
        namespace = os.readlink(f"/proc/{self.hosts[host].pid}/ns/mnt")
        for process in psutil.process_iter():
            try:
                ours = os.readlink(f"/proc/{process.pid}/ns/mnt") == namespace
                if ours and "scaler.object_storage.host_cache" in " ".join(process.cmdline()):
                    process.send_signal(signal.SIGKILL)
            except (OSError, psutil.Error):
                continue

    def kill_host(self, host: str) -> None:
        """Every process of the host's mount namespace, at once (a host that dies)."""
        namespace = os.readlink(f"/proc/{self.hosts[host].pid}/ns/mnt")
        for process in psutil.process_iter():
            try:
                if os.readlink(f"/proc/{process.pid}/ns/mnt") == namespace:
                    process.send_signal(signal.SIGKILL)
            except (OSError, psutil.Error):
                continue
        self.hosts[host].wait(timeout=DEADLINE_SECONDS)

    def log_tail(self) -> str:
        return "\n".join(
            f"--- {path.name}:\n{path.read_text(errors='replace')[-3000:]}" for path in sorted(self.logs.glob("*.log"))
        )


def on_host(host: str, command: list[str], temporary: Path) -> list[str]:
    """`command` on a host of its own: a mount and UTS namespace with its own /dev/shm and host name, and its own
    temporary directory (TMPDIR: the session's /tmp holds its keys, so it is not hidden)."""
    script = f'mount -t tmpfs -o size=8g tmpfs /dev/shm && hostname {host} && exec "$0" "$@"'
    temporary.mkdir(exist_ok=True)
    unshare = ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script]
    return ["env", f"TMPDIR={temporary}", *unshare, *command]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if reason := _missing():
        pytest.skip(reason)
    logs = tmp_path_factory.mktemp("host-caches")
    watch = ProcessWatch()

    def start(name: str, command: list[str]) -> subprocess.Popen[bytes]:
        with open(logs / f"{name}.log", "wb") as log:
            popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        watch.add(popen)
        return popen

    addresses = free_addresses()
    storage = [str(BIN_DIR / "scaler_object_storage_server"), addresses.object_storage, "--max-memory", "512MiB"]
    start("storage", on_host("cache-storage-host", [*storage, "-ll", "INFO"], logs / "storage-tmp"))
    scheduler = start("scheduler", [str(BIN_DIR / "scaler_scheduler"), addresses.scheduler, "-osa",
                                    addresses.object_storage, "-ll", "INFO"])  # fmt: skip
    hosts = {}
    try:
        probe_scheduler(addresses.scheduler, COLD_START_SECONDS, scheduler)
        for host in HOSTS:
            cluster = [str(BIN_DIR / "scaler_cluster"), "-n", "2", addresses.scheduler, "-his", "0.5", "-ll", "INFO"]
            hosts[host] = start(host, on_host(host, cluster, logs / f"{host}-tmp"))
        wait_for_workers(addresses.monitor, 2 * len(HOSTS), COLD_START_SECONDS)
        watch.remember()
        yield Stack(addresses, int(addresses.object_storage.rsplit(":", 1)[1]), hosts, logs)
    finally:
        watch.stop_all()
    leftovers = watch.leftovers()
    assert not leftovers, f"processes left behind: {leftovers}"


# ---------------------------------------------------------------- tests


def test_the_hosts_fetch_an_object_about_once_and_map_one_copy(stack: Stack) -> None:
    import numpy

    array = numpy.arange(ARRAY_ITEMS, dtype=numpy.float64)
    with Client(stack.addresses.scheduler) as client:
        reference = client.send_object(array)
        before = stack.bytes_sent_by_storage()
        results = client.map(where_read, [reference] * 16, [0.5] * 16)
        sent = stack.bytes_sent_by_storage() - before
    assert {total for _, _, total in results} == {float(array.sum())}
    hosts = {host for host, _, _ in results}
    assert hosts == set(HOSTS), f"the tasks ran on {hosts}"
    assert sent < 1.5 * array.nbytes, (
        f"the storage server sent {sent / MiB:.1f} MiB for a {array.nbytes / MiB:.1f} MiB object read on "
        f"{len(hosts)} hosts; logs:\n{stack.log_tail()}"
    )
    for host in hosts:
        maps = {where for ran_on, where, _ in results if ran_on == host}
        assert len(maps) == 1 and maps.pop().startswith("/dev/shm/scaler-objects-"), (
            f"the processors of {host} map {maps}: not one file of their cache"
        )


# ---------------------------------------------------------------- seen: the status feed, scaler_top, the dashboard


@pytest.fixture(scope="module")
def dashboard(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`scaler_gui` on the stack's monitor: the page's address (its /metrics there too)."""
    watch = ProcessWatch()
    port = free_tcp_port_block(1)
    log = tmp_path_factory.mktemp("dashboard") / "scaler_gui.log"
    command = [str(BIN_DIR / "scaler_gui"), stack.addresses.monitor, "--gui-address", f"127.0.0.1:{port}", "-bi", "0.2"]
    with open(log, "wb") as output:
        watch.add(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT))
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for(
            lambda: "dashboard at" in log.read_text(errors="replace"), "the dashboard to start", COLD_START_SECONDS
        )
        yield url
    finally:
        watch.stop_all()
    assert not watch.leftovers()


@dataclass(frozen=True)
class Broadcast:
    """An array of its own read by 16 tasks on both hosts: its id, its size as stored, and the status's storage from
    before it."""

    object_id: ObjectID
    size: int
    before: StorageTraffic


@pytest.fixture(scope="module")
def broadcast(stack: Stack) -> Broadcast:
    """One broadcast the tests of what is seen read (the feed, scaler_top, /metrics, the page): an array no other test
    sends."""
    import numpy

    with monitor(stack.addresses.monitor) as next_snapshot:
        first = next_snapshot()  # its storage may be as old as the last time anyone read the status
        before = next_snapshot(lambda snapshot: snapshot.time >= first.time + 2 * STATS_SECONDS).storage
    array = numpy.arange(ARRAY_ITEMS, dtype=numpy.float64) * 2.0
    with Client(stack.addresses.scheduler) as client:
        reference = client.send_object(array)
        results = client.map(where_read, [reference] * 16, [0.5] * 16)
    assert {host for host, _, _ in results} == set(HOSTS) and {total for _, _, total in results} == {array.sum()}
    return Broadcast(ObjectID(reference.object_id), reference.size, before)


def copies_of(storage: StorageTraffic, object_id: bytes) -> ObjectCopies | None:
    return next((copies for copies in storage.objects if copies.object_id == object_id), None)


def seen_on_both_hosts(object_id: bytes) -> Callable[[m.StatusSnapshot], bool]:
    """A status whose storage names both hosts' caches, and the object held by both."""

    def seen(snapshot: m.StatusSnapshot) -> bool:
        copies = copies_of(snapshot.storage, object_id)
        return (
            copies is not None and copies.hosts == len(HOSTS) and set(HOSTS) <= {r.host for r in snapshot.storage.hosts}
        )

    return seen


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _when(samples: Samples, key: tuple[str, tuple[tuple[str, str], ...]], value: float) -> Samples:
    """The samples once `key` has `value`; {} until then."""
    return samples if samples.get(key) == value else {}


def metric_samples(url: str) -> Samples:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_broadcast_shows_in_the_status_feed_scaler_top_and_metrics(
    stack: Stack, broadcast: Broadcast, dashboard: str, tmp_path: Path
) -> None:
    """The status's storage: one copy of the object out of the storage server, both hosts' caches holding it, the bytes
    that moved host to host; scaler_top's rows of it in a real terminal; /metrics' series of it."""
    object_id, size, before = broadcast.object_id, broadcast.size, broadcast.before
    with monitor(stack.addresses.monitor) as next_snapshot:
        storage = next_snapshot(seen_on_both_hosts(object_id)).storage
    copies = copies_of(storage, object_id)
    assert copies is not None and copies.total_bytes == size
    assert copies.copies_sent == 1, f"{copies}: the storage server sent it {copies.copies_sent} time(s)"
    out_of_storage = storage.bytes_sent_to_caches - before.bytes_sent_to_caches
    assert size <= out_of_storage < 1.5 * size, f"the storage sent its caches {out_of_storage} bytes for {size}"
    earlier = {row.host: row.bytes_from_hosts for row in before.hosts}
    host_to_host = sum(row.bytes_from_hosts - earlier.get(row.host, 0) for row in storage.hosts)
    assert host_to_host >= size, f"{host_to_host} bytes went host to host for an object of {size}: {storage.hosts}"

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (make test installs it): scaler_top was not shown")
    terminal = Terminal(tmp_path)
    try:
        terminal.type(f"{BIN_DIR / 'scaler_top'} {stack.addresses.monitor}", "Enter")
        screen = terminal.shows(object_id.hex()[:16])
        assert "object storage sent" in screen and all(host in screen for host in HOSTS), screen
        row = next(line for line in screen.splitlines() if object_id.hex()[:16] in line).split()
        assert row[2:5] == ["1", "2", "0"], f"copies sent, on hosts, fetching: {row}"
        folder = os.environ.get("SCALER_SCREENSHOTS")
        if folder:  # the part of the screen docs/monitoring.md shows
            lines = [line.rstrip() for line in screen.splitlines()]
            start = next(index for index, line in enumerate(lines) if line.startswith("object storage sent"))
            end = lines.index("", start) if "" in lines[start:] else len(lines)
            Path(folder).mkdir(parents=True, exist_ok=True)
            (Path(folder) / "scaler_top_bytes.txt").write_text("\n".join(lines[start:end]))
        terminal.type("q")
    finally:
        terminal.close()

    label = (("object", object_id.hex()[:16]),)
    held = ("scaler_object_hosts", (*label, ("state", "held")))
    samples = wait_for(lambda: _when(metric_samples(dashboard), held, len(HOSTS)), "/metrics to name it on both hosts")
    assert samples[("scaler_object_copies_sent_total", label)] == 1
    assert samples[("scaler_host_caches", ())] == len(HOSTS)
    for host in HOSTS:
        assert (("scaler_host_received_bytes_total", (("host", host), ("source", "hosts")))) in samples


@needs_browser
def test_the_dashboard_shows_where_a_broadcast_went(broadcast: Broadcast, dashboard: str, tmp_path: Path) -> None:
    object_id = broadcast.object_id
    with headless_chromium(tmp_path) as browser:
        browser.get(dashboard)
        wait_for(lambda: all(host in " ".join(texts(browser, "#hosts td")) for host in HOSTS), "both hosts' caches")
        on_both = wait_for(lambda: _on_both_hosts(browser, object_id.hex()[:16]), "the object on both hosts' caches")
        assert on_both[3] == "1", f"copies sent out of the storage: {on_both}"
        assert card(browser, "host caches") == str(len(HOSTS))
        browser.execute_script("document.getElementById('bytes-section').scrollIntoView();")
        screenshot(browser, "dashboard-bytes.png")
        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert not errors, errors


#: The cells of each row of the page's large objects: object, name, size, copies sent, on hosts, fetching.
_LARGE_OBJECT_CELLS = (
    "return [...document.querySelectorAll('#large-objects tr')].map(r => [...r.cells].map(c => c.textContent));"
)


def _on_both_hosts(browser: Any, shown: str) -> list[str]:
    """The page's row of an object once it says both hosts' caches hold it; [] until then."""
    rows = browser.execute_script(_LARGE_OBJECT_CELLS)
    return next((row for row in rows if row[:1] == [shown] and row[4] == str(len(HOSTS))), [])


def test_a_peer_without_the_workers_keys_gets_nothing_from_a_cache(stack: Stack) -> None:
    with Client(stack.addresses.scheduler) as client:
        reference = client.send_object(b"x" * (1 * MiB))
        assert client.submit(len, reference).result() == 1 * MiB  # the caches of the hosts exist now
        address = stack.cache_address(HOSTS[0])
        assert address.startswith("tcp://"), address
        workers = session_security("worker")
        as_workers = CurveSecurity(workers.public, workers.secret, workers.public)  # the cache serves with their pair
        with ObjectStorageConnection(address, role="worker", timeout_seconds=DEADLINE_SECONDS,
                                     security=as_workers) as allowed:  # fmt: skip
            assert len(allowed.get(reference.object_id)) == reference.size
        other = session_security("client")  # let in as a client (its own results: holder_reads.py), not as a worker
        as_client = CurveSecurity(other.public, other.secret, workers.public)
        with ObjectStorageConnection(address, role="worker", timeout_seconds=3, security=as_client) as refused:
            with pytest.raises(ScalerError):
                refused.get(reference.object_id)


@pytest.fixture
def reads_at_the_storage(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's client reads its results at the storage server, as one that cannot reach the workers' hosts does
    (a laptop): the reads the tests below count are those (from the caches, on this machine's loopback, a read ends
    before the next begins whatever the client does), and the uploads they wait for (a result read from its host and
    deleted before its upload began is not uploaded)."""
    monkeypatch.setattr(SourceChoice, "holder", lambda self, source: "")


def test_a_client_off_the_storage_host_reads_the_results_of_a_map_several_at_once(
    stack: Stack, reads_at_the_storage: None
) -> None:
    with Client(stack.addresses.scheduler) as client:
        results = client.map(sized_result, [4 * MiB] * 12, [0.2] * 12)
        receiving = stack.client_connections_that_received(os.getpid(), 2 * MiB)
    assert [len(result) for result in results] == [4 * MiB] * 12
    assert receiving >= 2, f"the results came over {receiving} connection(s) of this client to the storage"


def test_a_client_gathers_results_several_at_once_as_they_are_done(stack: Stack, reads_at_the_storage: None) -> None:
    with Client(stack.addresses.scheduler) as client:
        results = client.gather([client.submit(sized_result, 4 * MiB, 0.2 * (n % 4)) for n in range(12)])
        receiving = stack.client_connections_that_received(os.getpid(), 2 * MiB)
    assert [len(result) for result in results] == [4 * MiB] * 12
    assert receiving >= 2, f"the results came over {receiving} connection(s) of this client to the storage"


def test_a_client_that_takes_results_one_by_one_has_them_read_as_they_are_done(
    stack: Stack, reads_at_the_storage: None
) -> None:
    """A loop of `result()`: each stored result is read once its task is answered, several at once
    (client/eager_reads.py), not one after the other as the loop comes to them."""
    with Client(stack.addresses.scheduler) as client:
        futures = [client.submit(sized_result, 4 * MiB, 0.2 * (n % 4)) for n in range(12)]
        results = [future.result() for future in futures]
        receiving = stack.client_connections_that_received(os.getpid(), 2 * MiB)
    assert [len(result) for result in results] == [4 * MiB] * 12
    assert receiving >= 2, f"the results came over {receiving} connection(s) of this client to the storage"


def test_a_hosts_large_results_made_at_once_are_uploaded_one_after_the_other(
    stack: Stack, reads_at_the_storage: None
) -> None:
    """Both processors of a host make a large result at the same moment: its cache uploads them one after the other
    on one connection (host_cache/upstream.py, LARGE_UPLOAD_BYTES), so that the first is stored, and its task
    reported, in about half the time two side by side would take."""
    size = 8 * MiB
    before = stack.cache_upload_bytes()
    with Client(stack.addresses.scheduler) as client:
        made = client.gather([client.submit(large_result_after, size, 0.5) for _ in range(2 * len(HOSTS))])
    sent = {connection: count - before.get(connection, 0) for connection, count in stack.cache_upload_bytes().items()}
    made_two = {host for host, _ in made if [made_on for made_on, _ in made].count(host) == 2}
    assert made_two, f"no host made two of the results: {[host for host, _ in made]}"
    for host in made_two:
        carried = sorted(count for (on, _), count in sent.items() if on == host)
        assert carried and carried[-1] >= 2 * size, f"{host}'s cache uploaded its two results on {carried} bytes"


def test_a_source_that_cannot_be_reached_costs_time_not_the_object_and_is_said_once(stack: Stack) -> None:
    """A cache the storage server names as a source, at an address nobody answers (a host gone, or a firewall
    between the hosts): the fetch goes elsewhere, said once in the fetching cache's log, and the task reads the
    object."""
    import numpy

    unreachable = f"tcp://127.0.0.1:{free_tcp_port_block(1)}"
    array = numpy.arange(ARRAY_ITEMS // 4, dtype=numpy.float64)
    with Client(stack.addresses.scheduler) as client:
        reference = client.send_object(array)
        workers = session_security("worker")
        with ObjectStorageConnection(
            stack.addresses.object_storage, role="cache", security=workers, cache_address=unreachable
        ) as gone:  # a cache that asked for the object last, then vanished
            gone.call(SourceRequest(ObjectID(reference.object_id)))
        results = client.map(where_read, [reference] * 8, [0.2] * 8)
    assert {total for _, _, total in results} == {float(array.sum())}
    said = [line for line in stack.cache_logs() if unreachable in line and "fetching it elsewhere" in line]
    assert len(said) == 1, f"the unreachable source was said {len(said)} time(s) in the caches' logs"


def test_a_cache_that_dies_is_replaced_and_the_tasks_go_on(stack: Stack) -> None:
    import numpy

    host = HOSTS[0]
    array = numpy.arange(ARRAY_ITEMS // 4, dtype=numpy.float64)
    with Client(stack.addresses.scheduler) as client:
        reference = client.send_object(array)
        client.map(where_read, [reference] * 8, [0.2] * 8)
        killed = stack.cache_address(host)
        stack.kill_cache(host)
        wait_for(lambda: stack.cache_address(host) not in ("", killed), f"another cache on {host}")
        results = client.map(where_read, [reference] * 8, [0.2] * 8)
    assert {total for _, _, total in results} == {float(array.sum())}


def test_a_result_reported_done_survives_its_host(stack: Stack) -> None:
    """Killed before its upload was stored, the result is made again from its task on the host started after."""
    spare = "cache-host-c"
    with Client(stack.addresses.scheduler) as client:
        future = client.submit(large_result, 8 * MiB)
        wait_for(future.done, "the task to be reported done")
        for host in HOSTS:
            stack.kill_host(host)
        cluster = [str(BIN_DIR / "scaler_cluster"), "-n", "1", stack.addresses.scheduler, "-his", "0.5", "-ll", "INFO"]
        with open(stack.logs / f"{spare}.log", "wb") as log:
            stack.hosts[spare] = subprocess.Popen(
                on_host(spare, cluster, stack.logs / f"{spare}-tmp"), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            host, value = future.result()
        finally:
            stack.kill_host(spare)
    assert host in (*HOSTS, spare) and len(value) == 8 * MiB
