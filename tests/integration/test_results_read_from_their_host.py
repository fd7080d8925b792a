"""A client reads a large result from the host that made it (client/holder_reads.py, host_ledger S5,
host_cache/keys.py), on a rig of hosts: the storage server and the scheduler on one host, a worker host, the client on
a host of its own, every link 100 Mbit/s, CURVE keys as a deployment has them.

- A result of 10 MB made on the worker host is read by the client from that host's cache: the storage host's link sends
  nothing like the result (it carries its upload at most), the client's receives it.
- The worker host unreachable from the client (each host's firewall drops the other's packets): the client reads its
  results from the storage server, said once in its log however many it reads (two here).
- A key the storage server does not let in as a client finishes no handshake with a cache; a client's key reads from
  it only what it holds of its own (another object: notFound), stores nothing there, and claims there only the client
  ids the storage server bound to it (another id is refused).

Checked with the mechanism off: with `HolderReads._where` naming no holder (the client reads at the storage server, as
before), the first test fails (the storage host sent the result: 10.5 MB); with `SourceChoice.failed` forgetting the
host it gave up (`_given_up` not kept), the second test fails (said once per result: twice); with
`CacheSecurity.callback` letting every key in, the third fails (the unknown key's connection is refused by the cache's
hello check instead of finishing no handshake); without the cache's check of a client's id against those bound to its
key at the storage server (`StorageService._hello_refusal`), the third fails too (another id's read is answered).

Needs root and the rig's tools (tests/rig); skipped naming what is missing otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from scaler.security.curve import security_from_environment
from tests.rig import MBIT, Rig, unavailable
from tests.rig.stack import RigStack, key_variables

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
    pytest.mark.xdist_group("test_results_read_from_their_host"),
]

MB = 1_000_000
SIZE = 10 * MB
WORKER = "w1"

#: Results made on the worker host, read by the client (`count` of them, `size` bytes each): whether each is right.
READS = """
import json, logging, sys
from scaler import Client

logging.basicConfig(level=logging.WARNING)  # the client's log, on stderr

def make(seed, size):
    return bytes([seed]) * size

size, count = int(sys.argv[2]), int(sys.argv[3])
with Client(address=sys.argv[1]) as client:
    client.submit(len, b"").result()  # the worker warm
    print("warm", file=sys.stderr, flush=True)
    values = [client.submit(make, seed, size).result() for seed in range(1, count + 1)]
print(json.dumps({"right": [value == bytes([seed]) * size for seed, value in enumerate(values, 1)]}))
"""

#: At the cache at `sys.argv[2]` (whose key is `sys.argv[3]`), as a client: what a client's keys (the environment's)
#: could do, and what a key pair the servers' folder does not hold could.
AT_THE_CACHE = """
import json, os, sys
import zmq
from scaler.errors import ScalerError
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.security.curve import security_from_environment, CurveSecurity

def tried(security, owner, *calls):
    said = {}
    with ObjectStorageConnection(sys.argv[2], role="client", timeout_seconds=5, security=security,
                                 owner_id=owner, map_local=False, connect_seconds=1) as connection:
        for name in calls:
            try:
                connection.get(b"n" * 32) if name == "get" else connection.put(b"p" * 32, b"x")
                said[name] = "done"
            except ScalerError as error:
                said[name] = f"{type(error).__name__}: {error}"
    return said

client = security_from_environment(os.environ)
at_cache = CurveSecurity(client.public, client.secret, sys.argv[3].encode())
stranger = zmq.curve_keypair()
# a client's session at the storage server binds its id to its key, as a Client's does when it starts
with ObjectStorageConnection(sys.argv[4], role="client", timeout_seconds=30, security=client, owner_id=b"Client|x",
                             map_local=False) as session:
    session.delete([b"n" * 32])
    print(json.dumps({
        "client": tried(at_cache, b"Client|x", "get", "put"),
        "another id": tried(at_cache, b"Client|y", "get"),
        "stranger": tried(CurveSecurity(*stranger, sys.argv[3].encode()), b"Client|x", "get"),
    }))
"""


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with Rig.open(["storage", "client", WORKER], tmp_path_factory.mktemp("rig"), rate_bits=100 * MBIT) as made:
        yield made


@pytest.fixture(scope="module")
def stack(rig: Rig) -> Iterator[RigStack]:
    started = RigStack.start(rig, "storage", {WORKER: 1})
    try:
        yield started
    finally:
        started.stop()


def _reads(rig: Rig, stack: RigStack, count: int) -> tuple[list[bool], str]:
    script = rig.workdir / f"reads-{count}.py"
    script.write_text(READS)
    done = rig.host("client").run(
        stack.command("python"), str(script), stack.scheduler_address, str(SIZE), str(count), timeout_seconds=240,
        env=key_variables("client"),
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}\n{stack.logs()}"
    return json.loads(lines[-1])["right"], done.stderr


def _cache(rig: Rig) -> tuple[str, str]:
    """The worker host's cache: its address, and the key it serves with (the workers' public key)."""
    found = rig.host(WORKER).python(
        "import glob, time\n"
        "while not glob.glob('/dev/shm/scaler-cache-*/address'):\n    time.sleep(0.1)\n"
        "print(open(glob.glob('/dev/shm/scaler-cache-*/address')[0]).read().strip())",
        timeout_seconds=60,
    )
    assert found.returncode == 0, found.stderr
    workers = security_from_environment(key_variables("workers"))
    assert workers is not None
    return found.stdout.strip(), workers.public.decode()


@pytest.mark.timeout(300)
def test_a_client_reads_a_result_from_the_host_that_made_it(rig: Rig, stack: RigStack) -> None:
    before = rig.link_bytes()
    right, _ = _reads(rig, stack, 1)
    after = rig.link_bytes()
    assert right == [True]
    storage_sent = after["storage"].sent - before["storage"].sent
    storage_received = after["storage"].received - before["storage"].received
    client_received = after["client"].received - before["client"].received
    assert client_received >= SIZE, (client_received, stack.logs())
    assert storage_sent < SIZE / 4, (
        f"the storage host sent {storage_sent / MB:.1f} MB for a result of {SIZE / MB:.0f} MB: the client read it "
        f"there; {stack.logs()}"
    )
    assert storage_received < 1.5 * SIZE, (
        f"the storage host received {storage_received / MB:.1f} MB: the upload at most"
    )
    print(
        f"storage host: sent {storage_sent / MB:.2f} MB, received {storage_received / MB:.2f} MB; client received "
        f"{client_received / MB:.2f} MB"
    )


@pytest.mark.timeout(300)
def test_a_host_the_client_cannot_reach_costs_one_line_and_the_results_come_from_the_storage(
    rig: Rig, stack: RigStack
) -> None:
    rig.block("client", WORKER)
    try:
        right, log = _reads(rig, stack, 2)
    finally:
        rig.unblock("client", WORKER)
    assert right == [True, True], log
    said = log.count("from the host that holds it")
    assert said == 1, f"said {said} times: {log[-4000:]}"


@pytest.mark.timeout(300)
def test_a_key_without_the_client_role_gets_nothing_from_a_cache(rig: Rig, stack: RigStack) -> None:
    address, key = _cache(rig)
    script = rig.workdir / "at-the-cache.py"
    script.write_text(AT_THE_CACHE)
    done = rig.host("client").run(
        stack.command("python"), str(script), "-", address, key, stack.storage_address, env=key_variables("client")
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert "not reachable" in said["stranger"]["get"], said
    assert said["client"]["get"].startswith("MissingObjects"), said
    assert "has not bound this client id" in said["another id"]["get"], "a client key claims only its own ids"
    assert "nothing else" in said["client"]["put"], said
