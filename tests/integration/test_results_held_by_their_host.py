"""Large results reported once their host holds them (object_storage/held_results.py, host_cache/cache_rules.py C4,
scheduler/core/unstored_results.py), on a rig of hosts whose storage host's link is narrow, so that uploads take
seconds:

- the tasks of several hosts, each making a large result, are all reported done before the storage server stored the
  last of their uploads (before, a task was reported only once its result's upload was stored);
- a host killed after its task was reported and before its upload ended: the client's `result()` is still right, the
  task having run twice (its function counts its runs in a file the hosts share) and been reported once;
- a host's upload waits while it sends another host what that host reads (host_cache/upload_yield.py): stored only
  after the read's input had come.

Checked with the mechanism off: with `CacheRole.holds` off (the put answered once uploaded), the first test fails (the
last task is reported after its upload was stored) and the second too (no result is held: nothing is lost); with the
scheduler not running a lost result's task again (`TaskLifecycle.fates_told` doing nothing), the second fails (the
client's read waits on, past its timeout); with `upstream.queued_to_peers` returning 0 (uploads never wait), the third
fails (the upload was stored 2 s before the read's input had come).

Needs root and the rig's tools (tests/rig); skipped naming what is missing otherwise.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rig import MBIT, Rig, unavailable
from tests.rig.stack import RigStack, key_variables

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
    pytest.mark.xdist_group("test_results_held_by_their_host"),
]

MB = 1_000_000
WORKERS = {"w1": 1, "w2": 1, "w3": 1}
#: The storage host's link: narrow, so that each upload of SIZE takes about two seconds and they queue.
STORAGE_RATE_BITS = 16 * MBIT
SIZE = 4 * MB

#: Large results, one per host at about the same time; when the last task was reported (its future done: its answer
#: came; the value is read when asked for), as the monotonic time all the rig's hosts share; and their values.
REPORTED = """
import json, sys, time
from scaler import Client
from scaler.client.holder_reads import SourceChoice

# read at the storage server, as a client that cannot reach the workers' hosts does: a result read from its host and
# deleted before its upload began would not be uploaded, and the test counts the uploads
SourceChoice.holder = lambda self, source: ""

def make(seed, size):
    time.sleep(1.0)
    return bytes([seed]) * size

size, tasks = int(sys.argv[2]), int(sys.argv[3])
with Client(address=sys.argv[1]) as client:
    client.submit(make, 0, 8).result()  # every host's worker up and warm
    futures = [client.submit(make, seed, size) for seed in range(1, tasks + 1)]
    reported = []  # when each task's answer came (its future done; its value is read later)
    for future in futures:
        future.add_done_callback(lambda _: reported.append(time.monotonic()))
    values = [future.result() for future in futures]
right = [value[:1] * len(value) == value and value[0] for value in values]
print(json.dumps({"reported_at": max(reported), "right": right}))
"""

#: One large result whose task counts its runs in a file; once it is reported, says so (the test then kills its host),
#: then reads it.
LOST = """
import json, sys, time
from scaler import Client

def make(size, runs):
    with open(runs, "a") as counted:
        counted.write("ran\\n")
    return b"x" * size

size, runs = int(sys.argv[2]), sys.argv[3]
with Client(address=sys.argv[1]) as client:
    client.submit(len, b"").result()
    future = client.submit(make, size, runs)
    while not future.done():
        time.sleep(0.01)
    print("reported", flush=True)
    value = future.result()
print(json.dumps({"right": value == b"x" * size}))
"""

#: A graph: `made` on the maker's host (the only worker until the test adds the reader's, which `made` waits for),
#: then two tasks reading it, the first placed on the maker's host by its input, the second on the reader's (the
#: maker's is busy): the maker's makes a large result while the reader's reads `made`'s from the maker's cache over its
#: narrow link, and returns when its input had come (a monotonic time all the rig's hosts share), once the maker's
#: upload could be over (the graph's end deletes that result, and its upload with it). `both`, the graph's target,
#: reads the maker's result on its host, so that nobody reads it at the storage server (a reader there would send its
#: upload at once).
YIELDS = """
import json, os, socket, sys, threading, time
from scaler import Client

def made(size, released):
    while not os.path.exists(released):
        time.sleep(0.01)
    return b"a" * size

def either(made_value, later_size):
    if socket.gethostname() == maker:  # makes a large result while the other host reads `made`'s from here
        time.sleep(0.5)
        return b"b" * later_size
    arrived = time.monotonic()  # the other host: `made`'s result has come from the maker's
    time.sleep(4.0)
    return arrived

def both(one, other):
    return other if isinstance(one, bytes) else one

size, later_size, workdir, maker = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
released, second_up = os.path.join(workdir, "released"), os.path.join(workdir, "reader-up")
with Client(address=sys.argv[1]) as client:
    def warm_then_release():
        while not os.path.exists(second_up):
            time.sleep(0.05)
        client.submit(len, b"").result()  # on the reader's host (the maker's runs `made`): warm before it reads
        open(released, "w").close()
    warming = threading.Thread(target=warm_then_release)
    warming.start()
    graph = {
        "made": (made, size, released), "one": (either, "made", later_size), "other": (either, "made", later_size),
        "both": (both, "one", "other"),
    }
    arrived = client.get(graph, ["both"])["both"]
    warming.join()
print(json.dumps({"arrived": arrived}))
"""
#: What the task on the maker's host makes: large enough to be held and uploaded in turn, and uploaded (at the storage
#: link's rate) faster than `made`'s result crosses the reader's link.
LATER_SIZE = 1_500_000
#: The host that makes results (w1 dies in the test before), and the one that reads them from it, whose link is narrow
#: while it reads: `made`'s result takes about four seconds to cross it.
MAKER, READER = "w3", "w2"
READER_RATE_BITS = 8 * MBIT

_STORED = re.compile(
    r"upload turn: object (\w+), (\d+) bytes, asked at ([\d.]+), granted at ([\d.]+), stored at ([\d.]+)"
)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with Rig.open(["storage", "client", *WORKERS], tmp_path_factory.mktemp("rig"), rate_bits=100 * MBIT) as made:
        made.shape("storage", STORAGE_RATE_BITS)
        yield made


def _stored_at(stack: RigStack) -> list[float]:
    return [float(match[5]) for match in _STORED.finditer(stack.processes[0].log_text()) if int(match[2]) >= SIZE]


@pytest.mark.timeout(300)
def test_results_are_reported_before_their_uploads_are_stored(rig: Rig) -> None:
    stack = RigStack.start(rig, "storage", WORKERS, storage_args=("-ll", "DEBUG"))
    try:
        tasks = len(WORKERS)
        made = stack.run_script("client", REPORTED, str(SIZE), str(tasks))
        assert made["right"] == list(range(1, tasks + 1)), made
        stored = _stored_at(stack)
        assert len(stored) == tasks, (stored, stack.logs())
        assert made["reported_at"] < max(stored), (
            f"every task was reported at {made['reported_at']:.2f}, after the last upload was stored ({stored}): "
            f"{stack.logs()}"
        )
        print(f"{tasks} tasks reported {max(stored) - made['reported_at']:.1f} s before the last upload was stored")
    finally:
        stack.stop()


@pytest.mark.timeout(300)
def test_a_host_killed_after_reporting_a_result_before_its_upload_ended(rig: Rig) -> None:
    stack = RigStack.start(rig, "storage", {"w1": 1})
    runs = rig.workdir / "runs.txt"
    try:
        script = rig.workdir / "lost.py"
        script.write_text(LOST)
        client = rig.host("client").start(
            stack.command("python"), str(script), stack.scheduler_address, str(SIZE), str(runs),
            env=key_variables("client"),
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while "reported" not in client.log_text():
            assert client.is_running() and time.monotonic() < deadline, client.log_text() + stack.logs()
            time.sleep(0.05)
        rig.host("w1").die()  # its cache and workers with it: the result's upload had seconds to go
        stack.add_workers(READER, 1)
        client.popen.wait(timeout=180)
        assert client.popen.returncode == 0, client.log_text() + stack.logs()
        assert client.log_text().strip().splitlines()[-1] == '{"right": true}', client.log_text()
        assert Path(runs).read_text().count("ran") == 2, "the task ran twice: once on the host killed, once again"
        storage_log = stack.processes[0].log_text()
        assert "before it uploaded 1 result(s) it held" in storage_log, stack.logs()
    finally:
        stack.stop()


@pytest.mark.timeout(300)
def test_an_upload_waits_while_its_host_sends_another_host_what_it_reads(rig: Rig) -> None:
    """host_cache/upload_yield.py: a host makes a result while another reads one of the first's from its cache; the
    new result's upload goes up only once the read is sent (before, it went at once, beside the read, and was stored
    before the read's input had come)."""
    stack = RigStack.start(rig, "storage", {MAKER: 1}, storage_args=("-ll", "DEBUG"))
    workdir = rig.workdir / "yields"
    workdir.mkdir()
    rig.shape(READER, READER_RATE_BITS)
    try:
        script = rig.workdir / "yields.py"
        script.write_text(YIELDS)
        client = rig.host("client").start(
            stack.command("python"), str(script), stack.scheduler_address, str(SIZE), str(LATER_SIZE), str(workdir),
            MAKER, env=key_variables("client"),
        )  # fmt: skip
        stack.add_workers(READER, 1)
        stack.wait_for_workers(2)
        (workdir / "reader-up").touch()
        client.popen.wait(timeout=180)
        assert client.popen.returncode == 0, client.log_text() + stack.logs()
        arrived = json.loads(client.log_text().strip().splitlines()[-1])["arrived"]
        stored = [
            float(match[5]) for match in _STORED.finditer(stack.processes[0].log_text())
            if LATER_SIZE <= int(match[2]) < SIZE
        ]  # fmt: skip
        assert len(stored) == 1, stack.logs()
        assert stored[0] > arrived, (
            f"the maker's new result was stored at {stored[0]:.2f}, before the reader's input from the maker had come "
            f"({arrived:.2f}): it went beside the read"
        )
        print(f"the maker's upload stored {stored[0] - arrived:.2f} s after the reader's input from it had come")
    finally:
        rig.shape(READER, 100 * MBIT)
        stack.stop()
