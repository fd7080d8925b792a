"""Turns for the host caches' large uploads on a rig of hosts (object_storage/upload_admission.py): four worker hosts,
each making one large result at the same time, upload them to a storage host whose link is narrower than theirs; the
storage server admits them one after another, so that each is stored in turn instead of all four at the end.

The storage server's log (DEBUG) names each upload it gave a turn: when it was granted and when its put was stored. A
first round lets the window learn the storage host's link (it tries two at once once, which brings nothing there, and
keeps one at a time); in the second round each upload is granted only once the one before it was stored.

Checked with the mechanism off (`UploadAdmission._grant` granting every ask at once): the second round's uploads
overlap (each granted at once, all stored about together) and the test fails; with the caches not asking
(`Upstream._ask_turn` returning at once) the log names no upload and it fails too.

Needs root and the rig's tools (tests/rig); skipped naming what is missing otherwise.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest

from tests.rig import MBIT, Rig, unavailable
from tests.rig.stack import RigStack

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
    pytest.mark.xdist_group("test_upload_turns"),
]

MB = 1_000_000
WORKERS = {"w1": 1, "w2": 1, "w3": 1, "w4": 1}
#: The storage host's link: a quarter of a worker host's, so that the uploads of the four hosts are limited by it.
STORAGE_RATE_BITS = 25 * MBIT
SIZE = 4 * MB

#: `tasks` results of `size` bytes, each made by a task holding its slot a second first (so that each host makes one,
#: all at about the same time), gathered by the client at the storage server.
RESULTS = """
import json, sys, time
from scaler import Client
from scaler.client.holder_reads import SourceChoice

# read at the storage server, as a client that cannot reach the workers' hosts does: the uploads this test counts are
# then what the reads wait for (a result read from its host and deleted before its upload began is not uploaded)
SourceChoice.holder = lambda self, source: ""

def make(seed, size):
    time.sleep(1.0)
    return bytes([seed]) * size

size, tasks = int(sys.argv[2]), int(sys.argv[3])
with Client(address=sys.argv[1]) as client:
    client.submit(make, 0, 8).result()  # every host's worker up and warm
    values = client.gather([client.submit(make, seed, size) for seed in range(1, tasks + 1)])
print(json.dumps({"right": [value[:1] * len(value) == value and value[0] for value in values]}))
"""

_TURN = re.compile(
    r"upload turn: object (\w+), (\d+) bytes, asked at ([\d.]+), granted at ([\d.]+), stored at ([\d.]+)"
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RigStack]:
    with Rig.open(["storage", "client", *WORKERS], tmp_path_factory.mktemp("rig"), rate_bits=100 * MBIT) as rig:
        rig.shape("storage", STORAGE_RATE_BITS)
        started = RigStack.start(rig, "storage", WORKERS, storage_args=("-ll", "DEBUG"))
        try:
            yield started
        finally:
            started.stop()


def _turns(stack: RigStack) -> list[tuple[float, float]]:
    """(granted at, stored at) of every upload the storage server gave a turn, in the order it logged them."""
    return [
        (float(match[4]), float(match[5]))
        for match in _TURN.finditer(stack.processes[0].log_text())
        if int(match[2]) >= SIZE
    ]


@pytest.mark.timeout(300)
def test_the_hosts_large_results_are_stored_one_after_another(stack: RigStack) -> None:
    tasks = len(WORKERS)
    first = stack.run_script("client", RESULTS, str(SIZE), str(tasks))
    assert first["right"] == list(range(1, tasks + 1)), first
    learnt = len(_turns(stack))
    assert learnt == tasks, f"the storage server gave {learnt} turns for {tasks} large results: {stack.logs()}"
    second = stack.run_script("client", RESULTS, str(SIZE), str(tasks))
    assert second["right"] == list(range(1, tasks + 1)), second
    turns = sorted(_turns(stack)[learnt:])
    assert len(turns) == tasks, (turns, stack.logs())
    overlapping = [(one, next_one) for one, next_one in itertools.pairwise(turns) if next_one[0] < one[1]]
    assert not overlapping, f"uploads granted before the one before was stored: {overlapping} of {turns}"
    print(
        f"{tasks} results of {SIZE // MB} MB from {tasks} hosts over a {STORAGE_RATE_BITS // MBIT} Mbit/s storage "
        f"link, stored at {', '.join(f'{stored - turns[0][0]:.1f}' for _, stored in turns)} s"
    )
