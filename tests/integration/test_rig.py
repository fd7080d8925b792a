"""The rig of hosts itself (tests/rig, issue 74 item 1), with plain processes and sockets: each host is separate (its
own /dev/shm, /tmp, host name and PID namespace), its bytes are counted on its own link, its link is shaped on both
ends, the faults do what they say (a cut link, two hosts firewalled from each other, a killed host takes every
process of it along), and nothing of a rig is left once it is closed, nor once the process that made it is killed.

Checked with each mechanism off: without the tmpfs on /dev/shm (host_init.py) the first test sees the other host's
file; without `shape` the shaping test finds no tbf; with the router's cut set left empty, the cut test's connection
goes through; without the PID namespace (unshare without --pid) the killed host's processes outlive it; without the
watchdog, the namespaces of a killed maker are still there when the last test gives up; without XDG_CONFIG_HOME
named to the hosts (Host.environment), a host's processes make keys of their own under the host's HOME.

Needs root, ip, tc, nft, nsenter and unshare; skipped naming what is missing otherwise.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from scaler.security.key_folder import user_keys
from tests.integration.conftest import wait_for
from tests.rig import MBIT, Rig, unavailable

pytestmark = [pytest.mark.integration, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]

PORT = 5000
#: A server on a host: accepts connections one after another, and says how many bytes each brought.
RECEIVER = """
import socket, sys
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((sys.argv[1], int(sys.argv[2])))
server.listen()
print("listening", flush=True)
while True:
    connection, _ = server.accept()
    count = 0
    while data := connection.recv(1 << 20):
        count += len(data)
    print("received", count, flush=True)
    connection.close()
"""
#: A sender: `count` bytes to the address, then how long it took (seconds) on its last line; exit 3 when the connection
#: cannot be made within 2 s (a cut link, a firewall).
SENDER = """
import socket, sys, time
try:
    connection = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
except OSError as error:
    print("no connection:", error)
    sys.exit(3)
connection.settimeout(None)
chunk, left, started = b"x" * (1 << 20), int(sys.argv[3]), time.monotonic()
while left > 0:
    connection.sendall(chunk[: min(left, len(chunk))])
    left -= len(chunk)
connection.shutdown(socket.SHUT_WR)
connection.recv(1)
print(time.monotonic() - started)
"""


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with Rig.open(["a", "b", "c"], tmp_path_factory.mktemp("rig"), rate_bits=100 * MBIT) as made:
        receiver = made.host("a").start(made.python, "-c", RECEIVER, made.host("a").address, str(PORT), name="receiver")
        receiver.wait_for_log("listening")
        yield made


def receiver_log(rig: Rig) -> str:
    return next(process for process in rig.host("a").processes if process.name == "receiver").log_text()


def send(rig: Rig, sender: str, receiver: str, count: int) -> subprocess.CompletedProcess[str]:
    return rig.host(sender).python(SENDER, rig.host(receiver).address, str(PORT), str(count), timeout_seconds=120)


@pytest.mark.timeout(120)
def test_each_host_has_its_own_shared_memory_tmp_name_and_processes(rig: Rig) -> None:
    a, b = rig.host("a"), rig.host("b")
    made = a.run("sh", "-c", "echo a > /dev/shm/rig-test-file && echo a > /tmp/rig-test-file && hostname")
    assert made.returncode == 0 and made.stdout.strip() == "a", made.stderr
    seen = b.run("sh", "-c", "ls /dev/shm /tmp; hostname; cat /proc/1/cmdline | tr '\\0' ' '")
    assert "rig-test-file" not in seen.stdout and seen.stdout.splitlines()[-2] == "b", seen.stdout
    assert "host_init.py b" in seen.stdout.splitlines()[-1]  # its PID 1 is its own first process
    assert not Path("/dev/shm/rig-test-file").exists() and not Path("/tmp/rig-test-file").exists()
    assert a.run("cat", "/dev/shm/rig-test-file").stdout == "a\n"  # the host keeps it
    assert rig.workdir.exists() and b.run("ls", str(rig.workdir)).returncode == 0  # the test's folder is seen by all


@pytest.mark.timeout(120)
def test_every_host_uses_the_keys_of_the_rigs_maker_even_when_it_names_no_configuration_folder(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host's HOME is its own; its processes still find the user's keys of the process that made the rig (where
    RigStack's key variables come from), also when that process sets no XDG_CONFIG_HOME, as a benchmark run outside
    the suite does: servers with keys of their own failed every worker's CURVE handshake."""
    expected = Path(user_keys().path("server.key")).read_text()
    monkeypatch.delenv("XDG_CONFIG_HOME")
    code = "from pathlib import Path\nfrom scaler.security.key_folder import user_keys\n"
    code += "print(Path(user_keys().path('server.key')).read_text(), end='')"
    for name in ("a", "b"):
        seen = rig.host(name).python(code)
        assert seen.returncode == 0 and seen.stdout == expected, (name, seen.stdout, seen.stderr)


@pytest.mark.timeout(120)
def test_bytes_are_counted_on_the_links_that_carried_them_and_the_shaping_holds_near_its_rate(
    rig: Rig, record_property: pytest.RecordProperty
) -> None:
    """20 MB from b to a: b's link counts them sent, a's received, c's neither. The shaping is measured, not asserted
    (no timing in tests): both ends of every link carry tbf at the rig's rate, and the rate a transfer got is
    recorded (96 Mbit/s of payload for 100 Mbit/s links, unloaded)."""
    for name in ("a", "b", "c"):
        for end in rig.shaping(name):
            assert end.kind == "tbf" and end.rate_bits == 100 * MBIT, (name, end)
    count = 20 * 1024 * 1024
    before = rig.link_bytes()
    sent = send(rig, "b", "a", count)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    after = rig.link_bytes()
    moved = {
        name: (after[name].sent - before[name].sent, after[name].received - before[name].received) for name in after
    }
    assert count <= moved["b"][0] <= count * 1.1 and count <= moved["a"][1] <= count * 1.1, moved
    assert moved["c"][0] < 100_000 and moved["c"][1] < 100_000, moved  # neighbours' ARP at most
    rate = count * 8 / float(sent.stdout.split()[-1]) / MBIT
    record_property("payload_mbit_per_second_at_100", round(rate, 1))
    print(f"20 MB from b to a over 100 Mbit/s links: {rate:.1f} Mbit/s of payload")


@pytest.mark.timeout(120)
def test_a_cut_link_carries_nothing_until_healed(rig: Rig) -> None:
    rig.cut("a")
    try:
        heard = receiver_log(rig).count("received")
        cut = send(rig, "b", "a", 1024)
        assert cut.returncode == 3 and "no connection" in cut.stdout, cut.stdout + cut.stderr
        assert receiver_log(rig).count("received") == heard
    finally:
        rig.heal("a")
    healed = send(rig, "b", "a", 1024)
    assert healed.returncode == 0, healed.stdout + healed.stderr


@pytest.mark.timeout(120)
def test_a_firewall_between_two_hosts_leaves_the_others_through(rig: Rig) -> None:
    rig.block("a", "b")
    try:
        blocked = send(rig, "b", "a", 1024)
        assert blocked.returncode == 3 and "no connection" in blocked.stdout, blocked.stdout + blocked.stderr
        other = send(rig, "c", "a", 1024)
        assert other.returncode == 0, other.stdout + other.stderr
    finally:
        rig.unblock("a", "b")
    again = send(rig, "b", "a", 1024)
    assert again.returncode == 0, again.stdout + again.stderr


def rig_namespaces(owner_pid: int, number: int | None = None) -> list[str]:
    """The namespaces of the rigs `owner_pid` made (of its rig `number` only, when given)."""
    mine = re.compile(rf"^rig{owner_pid}n{number if number is not None else '[0-9]+'}[rh][0-9]*$")
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listed.splitlines() if mine.match(line.split()[0] if line.strip() else "")]


def shm_mounts() -> int:
    return sum(1 for line in Path("/proc/self/mountinfo").read_text().splitlines() if " /dev/shm " in line)


@pytest.mark.timeout(120)
def test_a_killed_host_takes_every_process_along_and_a_closed_rig_leaves_nothing(tmp_path: Path) -> None:
    mounts = shm_mounts()
    with Rig.open(["x", "y"], tmp_path / "rig") as rig:
        x, y = rig.host("x"), rig.host("y")
        tree = x.start("sh", "-c", "sleep 1000 & sleep 1000 & sh -c 'sleep 1000' & wait", name="tree")
        alone = y.start("sleep", "1000")
        wait_for(lambda: len(x.pids()) >= 5, "x's processes to start")  # its first process, sh, 3 sleeps, sh
        victims = [psutil.Process(pid) for pid in x.pids()]
        rig.kill("x")
        wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in victims),
                 "the killed host's processes to be gone")  # fmt: skip
        assert x.pids() == [] and tree.popen.poll() is not None
        assert alone.is_running() and y.run("true").returncode == 0  # the other host lives on
        kept = [psutil.Process(pid) for pid in y.pids()]
        watchdog = rig._watchdog
        assert rig_namespaces(os.getpid(), rig.plan.number)
    assert rig_namespaces(os.getpid(), rig.plan.number) == []
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in kept)
    assert watchdog is not None and watchdog.poll() is not None
    assert shm_mounts() == mounts  # the hosts' mounts were never the machine's


MAKER = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from tests.rig import Rig
rig = Rig.make(["p", "q"], Path(sys.argv[1]))
for name in ("p", "q"):
    rig.host(name).start("sleep", "1000")
time.sleep(0.5)
print(json.dumps([pid for host in rig.hosts.values() for pid in host.pids()]), flush=True)
time.sleep(1000)
"""


@pytest.mark.timeout(120)
def test_the_rig_of_a_killed_maker_is_removed(tmp_path: Path) -> None:
    """The process that made a rig is SIGKILLed: its watchdog removes the hosts (their processes) and the
    namespaces."""
    root = str(Path(__file__).parents[2])
    maker = subprocess.Popen([sys.executable, "-c", MAKER, str(tmp_path / "rig"), root], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert maker.stdout is not None
        line = maker.stdout.readline()
        assert line, maker.stderr.read() if maker.stderr else ""
        pids = json.loads(line)
        assert rig_namespaces(maker.pid) and len(pids) >= 4
    finally:
        maker.send_signal(signal.SIGKILL)
        maker.communicate()
    wait_for(lambda: rig_namespaces(maker.pid) == [], "the killed maker's namespaces to be removed")
    wait_for(lambda: not any(psutil.pid_exists(pid) and not _zombie(pid) for pid in pids), "its hosts' processes")


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
