"""A real stack across the rig of hosts (issue 74): object storage and scheduler on one host, worker pools of two on
two others, clients on one more, every byte between them crossing 100 Mbit/s links; one stack for the module.

- a map and a large object read by every slot give the right answers, and the object's bytes are on the links: each
  worker host receives it, and the storage host's egress is recorded (today each processor fetches its own copy);
- results move host to host (item 5): in an all-to-all exchange of partitions made by tasks on both worker hosts, the
  worker hosts receive each other's partitions from each other's caches (the storage server's ledger names the cache
  that uploaded a result as its holder), and the storage host's link sends almost none of them;
- slow is not failed (item 7): a 100 MB get over a link on which it takes longer than the storage timeout succeeds,
  since the timeout bounds the server's silence, not the get's duration; a storage server frozen mid-transfer
  (SIGSTOP) fails the get after the silence bound;
- seen (item 8): while a broadcast crosses to the worker hosts the status names each transfer under way (to which
  host, from where, how far: the second host fetching from the first), and then both hosts' caches holding the object,
  sent once out of the storage server;
- placement follows data (item 4): once a host read an object, later readers of it go to that host while one of its
  slots is idle (the other host receives none of it), and a reader whose holding host is busy runs elsewhere at once;
- a task's inputs that its host's cache lacks are fetched side by side, not one after another (the status shows them
  under way to its host together).

Checked with the mechanisms off: with the core's deadline counted from the request's sending alone (`_deadline`
without `_heard_at`), the 100 MB get fails with "sent nothing for 3 s" after 3 s; with `HostLedger.uploaded` doing
nothing, the storage host sends the exchange's partitions (about 4 of them) and the exchange's test fails; with
`TaskDecoder._map_together` returning at once, no status shows more than one of a task's inputs under way.

Needs root and the rig's tools (tests/rig); skipped naming what is missing otherwise.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import wait_for
from tests.rig import MBIT, Rig, unavailable
from tests.rig.stack import RigStack, key_variables

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
    pytest.mark.xdist_group("test_rig_stack"),  # one rig for the module's tests
]

MB = 1_000_000
WORKERS = {"w1": 2, "w2": 2}
#: The storage timeout of the tests of item 7: shorter than a 100 MB get takes at 100 Mbit/s (8.4 s).
TIMEOUT_SECONDS = 3

BROADCAST = """
import json, sys, time
import numpy as np
from scaler import Client

def square(x):
    return x * x

def total(array, seconds):
    time.sleep(seconds)  # holds its slot, so that every slot runs one
    return float(array.sum())

size, tasks = int(sys.argv[2]), int(sys.argv[3])
with Client(address=sys.argv[1]) as client:
    squares = client.map(square, range(100))
    reference = client.send_object(np.ones(size // 8), name="shared")
    sums = [future.result() for future in [client.submit(total, reference, 2.0) for _ in range(tasks)]]
print(json.dumps({"squares_right": squares == [x * x for x in range(100)], "sums": sums}))
"""

#: Every one of `makers` partitions, made by a task of its own (holding its slot a second, so that the makers run on
#: both hosts), read by each of `makers` reducers: a shuffle of one graph, the partitions the reducers' arguments.
EXCHANGE = """
import json, sys, time
import numpy as np
from scaler import Client

def make(seed, size, seconds):
    time.sleep(seconds)
    return np.full(size // 8, float(seed))

def reduce_parts(*parts):
    return float(sum(part[0] for part in parts))

size, makers = int(sys.argv[2]), int(sys.argv[3])
with Client(address=sys.argv[1]) as client:
    graph = {f"part-{i}": (make, i, size, 1.0) for i in range(makers)}
    graph.update({f"reduce-{j}": (reduce_parts, *[f"part-{i}" for i in range(makers)]) for j in range(makers)})
    reduced = client.get(graph, [f"reduce-{j}" for j in range(makers)])
print(json.dumps({"reduced": [reduced[f"reduce-{j}"] for j in range(makers)]}))
"""

#: Placement follows data (item 4), in one client's session; `folder` is on every host (the rig's work folder), where
#: the client's files release the tasks that wait on them. Phase one: while the host that load alone chooses first
#: (`first`) is kept busy, a first reader of an object of `size` bytes runs on the other host (`holder`); then, every
#: slot idle, later readers go to the holder's workers, where load alone would send them to `first`. Phase two: two
#: readers of a second object (an eighth of the first's size) hold both slots of its host; a third reader goes
#: elsewhere at once, done while they still wait.
LOCALITY = """
import json, os, socket, sys, time
import numpy as np
from scaler import Client

def wait_for(path):
    deadline = time.monotonic() + 120
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)

def host():
    return socket.gethostname()

def hold(folder, name, *arrays):
    me = socket.gethostname()
    open(os.path.join(folder, f"started-{name}-{me}-{os.getpid()}"), "w").close()
    wait_for(os.path.join(folder, f"release-{name}-{me}"))
    return me

def read(array):
    return socket.gethostname(), float(array[:4].sum())

def started(folder, name, count):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        seen = [entry.split("-")[2] for entry in os.listdir(folder) if entry.startswith(f"started-{name}-")]
        if len(seen) >= count:
            return seen
        time.sleep(0.02)
    raise SystemExit(f"{count} holders of {name} did not start")

def release(folder, name, host_name):
    open(os.path.join(folder, f"release-{name}-{host_name}"), "w").close()

folder, size, slots = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with Client(address=sys.argv[1]) as client:
    first = client.submit(host).result()
    holders = [client.submit(hold, folder, "a") for _ in range(slots)]
    hosts = started(folder, "a", slots)
    holder = next(name for name in hosts if name != first)
    release(folder, "a", holder)
    while sum(future.done() for future in holders) < hosts.count(holder):  # the holder's slots idle again
        time.sleep(0.02)
    shared = client.send_object(np.ones(size // 8), name="located")
    first_reader = client.submit(read, shared).result()[0]
    release(folder, "a", first)
    [future.result() for future in holders]
    later = [client.submit(read, shared).result()[0] for _ in range(4)]
    other = client.send_object(np.full(size // 64, 2.0), name="located-busy")
    busy = [client.submit(hold, folder, "b", other) for _ in range(2)]
    busy_hosts = started(folder, "b", 2)
    elsewhere = client.submit(read, other).result(timeout=120)[0]
    for name in set(busy_hosts):
        release(folder, "b", name)
    [future.result() for future in busy]
print(json.dumps({"first": first, "holder": holder, "first_reader": first_reader, "later": later,
                  "busy_hosts": busy_hosts, "elsewhere": elsewhere}))
"""

PUT = """
import os, sys
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.security.curve import security_from_environment

security = security_from_environment(os.environ)
with ObjectStorageConnection(sys.argv[2], "worker", security=security) as storage:
    storage.put(bytes.fromhex(sys.argv[3]), bytes(range(256)) * (int(sys.argv[4]) // 256))
print("{}")
"""

GET = """
import json, os, sys, time
from scaler.errors import ObjectStorageException
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.security.curve import security_from_environment

security = security_from_environment(os.environ)
with ObjectStorageConnection(sys.argv[2], "worker", timeout_seconds=float(sys.argv[4]), security=security) as storage:
    storage.exists(b"greeting")  # connected and greeted before the clock starts
    print("reading", flush=True)
    started = time.monotonic()
    try:
        data = storage.get(bytes.fromhex(sys.argv[3]))
        outcome = {"size": len(data), "right": bytes(data[:512]) == bytes(range(256)) * 2}
    except ObjectStorageException as error:
        outcome = {"error": str(error)}
print(json.dumps({**outcome, "seconds": time.monotonic() - started}))
"""

#: Reads the status feed on a host until it has seen a transfer of an object of the given size under way and then that
#: object held by every worker host's cache (or its time is up): prints what it saw (JSON).
WATCH_TRANSFERS = """
import json, sys, time
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC

address, size, hosts, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
reader = FeedReader(address, topics=(STATUS_TOPIC,))
print("watching", flush=True)
deadline, under_way, held = time.monotonic() + seconds, [], None
while time.monotonic() < deadline and held is None:
    status = reader.receive(0.1)
    if not isinstance(status, m.StatusSnapshot):
        continue
    storage = status.storage
    for each in storage.transfers:
        if abs(each.total_bytes - size) < 4096 and 0 < each.done_bytes < each.total_bytes:
            under_way.append({"to": each.to, "from": each.source, "done": each.done_bytes, "seconds": each.seconds})
    for copies in storage.objects:
        if abs(copies.total_bytes - size) < 4096 and copies.hosts >= hosts and under_way:
            held = {"copies_sent": copies.copies_sent, "hosts": copies.hosts,
                    "rows": {row.host: [row.bytes_from_storage, row.bytes_from_hosts] for row in storage.hosts}}
reader.close()
print(json.dumps({"under_way": under_way, "held": held}))
"""

#: Three objects of distinct sizes sent by the client, then one task reading all three: its host's cache lacks them.
INPUTS_TOGETHER = """
import json, socket, sys
import numpy as np
from scaler import Client

def sums(*arrays):
    return socket.gethostname(), [float(array.sum()) for array in arrays]

sizes = [int(size) for size in sys.argv[2].split(",")]
with Client(address=sys.argv[1]) as client:
    client.submit(len, b"").result()  # a worker's processor up, its storage connection open
    references = [client.send_object(np.ones(size // 8), name=f"together-{size}") for size in sizes]
    host, totals = client.submit(sums, *references).result()
print(json.dumps({"host": host, "right": totals == [float(size // 8) for size in sizes]}))
"""

#: Reads the status feed on a host until `stop` exists: the most transfers of objects of the given sizes that one status
#: showed under way to one host at once (JSON).
WATCH_TOGETHER = """
import json, os, sys, time
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC

address, sizes, stop = sys.argv[1], {int(size) for size in sys.argv[2].split(",")}, sys.argv[3]
reader = FeedReader(address, topics=(STATUS_TOPIC,))
print("watching", flush=True)
deadline, most, seen = time.monotonic() + 240, 0, []
while time.monotonic() < deadline and not os.path.exists(stop):
    status = reader.receive(0.1)
    if not isinstance(status, m.StatusSnapshot):
        continue
    to_host = {}
    for each in status.storage.transfers:
        size = next((size for size in sizes if abs(each.total_bytes - size) < 4096), None)  # a pickle's header more
        if size is not None:
            to_host.setdefault(each.to, set()).add(size)
    if to_host:
        seen.append({host: sorted(got) for host, got in to_host.items()})
        most = max(most, *(len(got) for got in to_host.values()))
reader.close()
print(json.dumps({"most": most, "seen": seen[:20]}))
"""
#: The worker hosts' links while a task's inputs cross in the test of `INPUTS_TOGETHER`: narrow, so that they take
#: seconds (three objects of 4 MB: 6 s together), several of the scheduler's statuses.
TOGETHER_RATE_BITS = 16 * MBIT


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RigStack]:
    with Rig.open(["storage", "client", *WORKERS], tmp_path_factory.mktemp("rig"), rate_bits=100 * MBIT) as rig:
        started = RigStack.start(rig, "storage", WORKERS)
        try:
            yield started
        finally:
            started.stop()


def client_run_counted(stack: RigStack, script: str, size: int, count: int) -> tuple[Any, dict[str, int], int]:
    """Run `script SIZE COUNT` on the client host: its answer, the bytes each worker host received meanwhile, and the
    bytes the storage host sent."""
    before = stack.rig.link_bytes()
    answer = stack.run_script("client", script, str(size), str(count))
    after = stack.rig.link_bytes()
    received = {name: after[name].received - before[name].received for name in WORKERS}
    return answer, received, after["storage"].sent - before["storage"].sent


@pytest.mark.timeout(300)
def test_a_map_and_an_object_read_by_every_slot_across_hosts(
    stack: RigStack, record_property: pytest.RecordProperty
) -> None:
    size, slots = 20 * MB, sum(WORKERS.values())
    answer, received, sent = client_run_counted(stack, BROADCAST, size, slots)
    assert answer["squares_right"] and answer["sums"] == [size // 8] * slots, answer
    assert all(count >= size for count in received.values()), received  # the object crossed to every worker host
    egress = sent / size
    record_property("storage_egress_copies", round(egress, 2))
    print(
        f"a {size // MB} MB object read by {slots} slots on {len(WORKERS)} hosts: the storage host sent {egress:.1f}x "
        f"it; each worker host received {', '.join(f'{n} {c / size:.1f}x' for n, c in received.items())}"
    )


@pytest.mark.timeout(300)
def test_results_move_host_to_host_not_through_the_storage_host(
    stack: RigStack, record_property: pytest.RecordProperty
) -> None:
    size, makers = 10 * MB, sum(WORKERS.values())
    answer, received, egress = client_run_counted(stack, EXCHANGE, size, makers)
    assert answer["reduced"] == [float(sum(range(makers)))] * makers, answer
    crossed = sum(received.values())
    record_property("storage_egress_partitions", round(egress / size, 2))
    print(
        f"{makers} partitions of {size // MB} MB, each read by {makers} tasks on {len(WORKERS)} hosts: the worker "
        f"hosts received {crossed / size:.1f} partitions, the storage host sent {egress / size:.2f}"
    )
    assert crossed >= 2 * size, f"the partitions did not cross between the hosts ({crossed} bytes): placement?"
    assert egress < size / 2, (
        f"the storage host sent {egress / size:.1f} partitions: results went through it\n{stack.logs()}"
    )


def stored(stack: RigStack, object_hex: str, size: int) -> None:
    """An object of `size` bytes put from the storage host (into its segment directory: at once)."""
    stack.run_script("storage", PUT, stack.storage_address, object_hex, str(size), pair="workers")


@pytest.mark.timeout(300)
def test_a_get_that_takes_longer_than_the_timeout_but_keeps_moving_is_not_cut(stack: RigStack) -> None:
    size = 100 * MB
    _host_end, router_end = stack.rig.shaping("client")
    assert router_end.kind == "tbf" and size * 8 / router_end.rate_bits > 2 * TIMEOUT_SECONDS, router_end
    stored(stack, "aa" * 32, size)
    answer = stack.run_script("client", GET, stack.storage_address, "aa" * 32, str(TIMEOUT_SECONDS), pair="workers")
    assert answer.get("size") == size and answer["right"], answer
    print(f"a {size // MB} MB get over a 100 Mbit/s link with a {TIMEOUT_SECONDS} s timeout: {answer['seconds']:.1f} s")


@pytest.mark.timeout(300)
def test_a_storage_frozen_mid_transfer_fails_the_get_after_the_silence_bound(stack: RigStack) -> None:
    size, rig = 100 * MB, stack.rig
    stored(stack, "bb" * 32, size)
    script = rig.workdir / "frozen-get.py"
    script.write_text(GET)
    reader = rig.host("client").start(
        sys.executable, str(script), stack.scheduler_address, stack.storage_address, "bb" * 32, str(TIMEOUT_SECONDS),
        env=key_variables("workers"), name="reader",
    )  # fmt: skip
    reader.wait_for_log("reading")
    start = rig.link_bytes()["client"].received
    wait_for(lambda: rig.link_bytes()["client"].received - start > 20 * MB, "20 MB of the get to cross", 60)
    storage = stack.processes[0]
    storage.signal(signal.SIGSTOP)
    try:
        reader.popen.wait(120)
    finally:
        storage.signal(signal.SIGCONT)
    last = reader.log_text().strip().splitlines()[-1]
    assert f"sent nothing for {TIMEOUT_SECONDS} s" in last and stack.storage_address in last, reader.log_text()
    assert rig.link_bytes()["client"].received - start < size  # it did not all come


@pytest.mark.timeout(300)
def test_a_broadcast_in_flight_shows_its_transfers_in_the_status(stack: RigStack) -> None:
    """Issue 74 item 8 on shaped links: while an object crosses to the worker hosts, the status names each transfer
    under way (to which host, from where, how far); once both hosts' caches hold it, the storage server sent it once.
    Checked with the mechanism off: with the caches' reports giving no transfer (`Ledger.report` with `transfers=()`)
    no status shows one and the test fails."""
    size, slots = 30 * MB + 8 * 1024, sum(WORKERS.values())  # an object of its own (the other test's is 20 MB)
    script = stack.rig.workdir / "watch-transfers.py"
    script.write_text(WATCH_TRANSFERS)
    watcher = stack.storage_host.start(
        stack.command("python"), str(script), stack.monitor_address, str(size), str(len(WORKERS)), "120",
        name="watcher",
    )  # fmt: skip
    watcher.wait_for_log("watching")
    answer = stack.run_script("client", BROADCAST, str(size), str(slots))
    assert answer["sums"] == [size // 8] * slots, answer
    watcher.popen.wait(150)
    seen = json.loads(watcher.log_text().strip().splitlines()[-1])
    assert seen["under_way"], f"no status showed a transfer of the object under way: {seen}"
    assert {each["to"] for each in seen["under_way"]} <= set(WORKERS), seen
    assert seen["held"] is not None and seen["held"]["copies_sent"] == 1, seen
    print(f"transfers of a {size // MB} MB broadcast seen under way: {seen['under_way'][:4]}; then {seen['held']}")


@pytest.mark.timeout(300)
def test_tasks_reading_an_object_go_to_the_host_that_holds_it_unless_it_is_busy(stack: RigStack) -> None:
    """Issue 74 item 4 on shaped links: once a host read an object, later tasks reading it go to that host's workers
    while one of them is idle (the host load alone would choose receives none of its bytes); when its workers are all
    busy, a reader runs elsewhere at once, not after them. Checked with the mechanism off (`ObjectHosts.nearer`
    returning None): the later readers run on the host load alone chooses, which then receives the object."""
    size, slots = 16 * MB, sum(WORKERS.values())
    folder = stack.rig.workdir / "locality"
    folder.mkdir()
    before = stack.rig.link_bytes()
    answer = stack.run_script("client", LOCALITY, str(folder), str(size), str(slots))
    after = stack.rig.link_bytes()
    received = {name: after[name].received - before[name].received for name in WORKERS}
    first, holder = answer["first"], answer["holder"]
    assert answer["first_reader"] == holder != first, answer
    assert answer["later"] == [holder] * 4, f"later readers did not follow the object to {holder}: {answer}"
    assert received[first] < size / 2 < size <= received[holder], (received, answer)  # the second object: size / 8
    busy = answer["busy_hosts"]
    assert len(set(busy)) == 1 and answer["elsewhere"] not in busy, answer
    print(
        f"placement by data: a {size // MB} MB object read first on {holder}, then 4 readers on {answer['later']}; "
        f"{first} received {received[first] / MB:.1f} MB, {holder} {received[holder] / MB:.1f} MB; with {busy[0]} "
        f"busy a reader ran on {answer['elsewhere']}"
    )


@pytest.mark.timeout(300)
def test_a_tasks_inputs_are_fetched_side_by_side(stack: RigStack) -> None:
    """A task reading three objects its host's cache lacks has them fetched at once (`TaskDecoder._map_together`,
    `ObjectStorageConnection.map_together`): the status shows the three under way to its host together. Checked with
    the mechanism off (`_map_together` returning at once): each read waits for the one before, and no status shows
    more than one under way (`most` 1)."""
    sizes = [4 * MB + 65536 * index for index in range(1, 4)]
    listed = ",".join(str(size) for size in sizes)
    rig = stack.rig
    script, stop = rig.workdir / "watch-together.py", rig.workdir / "watch-together.stop"
    script.write_text(WATCH_TOGETHER)
    watcher = stack.storage_host.start(
        stack.command("python"), str(script), stack.monitor_address, listed, str(stop), name="together-watcher"
    )
    try:
        watcher.wait_for_log("watching")
        for host in WORKERS:
            rig.shape(host, TOGETHER_RATE_BITS)
        answer = stack.run_script("client", INPUTS_TOGETHER, listed)
    finally:
        for host in WORKERS:
            rig.shape(host, 100 * MBIT)
        stop.touch()
    watcher.popen.wait(60)
    seen = json.loads(watcher.log_text().strip().splitlines()[-1])
    assert answer["right"], answer
    assert seen["most"] == len(sizes), f"the inputs were not fetched together to {answer['host']}: {seen}"
    print(f"a task's 3 inputs of 4 MB: under way to {answer['host']} together ({seen['seen'][:3]})")
