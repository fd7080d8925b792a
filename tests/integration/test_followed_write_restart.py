"""A result announced while it is written reads back through a storage restart (issue 42 on the default route, issue
38's guarantee: every object a client was told is there reads back).

Real processes: an object storage server with a spill directory, a scheduler using it (`-osa`), one worker. A task
returns a large `bytes` (its processor writes it while readers follow: object_storage/followed_put.py); the write is
held back in the processor until a gate file exists, so the client's future is done (the result announced) and the
client's read waits at the server while the object is not stored. Then the storage is restarted at the same address:

- SIGKILL: the new server finds the write's `.put` file in the segment directory it takes over and keeps the object
  awaiting its writer (followed_writes rule 6); the gate opens; the processor's next request reaches a server that does
  not know the write, and it writes the whole result again from its own copy (followed_rewrite.py). The client's read,
  sent again to the new server, gets the object.
- SIGTERM: the server stops only once the write under way is stored (server.py `finish_writes`); the gate opens while
  it waits; the object is in the spill directory, and the new server serves it.

Either way the client reads the whole result, and the processor takes a task again afterwards.

Checked by hand with the mechanisms off: with `followed_rewrite.AFTER[(Step.LOST, True)]` set to `Next.GIVE_UP`
(no rewrite), both SIGKILL cases fail: the writer gives up, the awaiting write is ended by the server's stall sweep
and the client's read raises MissingObjects ("its writer stopped mid-write"); with `FollowedWrites.recover` doing
nothing (rule 6 off), both SIGKILL cases fail at once: the client's read, sent again to the new server, is answered
"not stored" before the writer comes back; with `_ServerShell.finish_writes`
returning at once, the SIGTERM case fails: the object is not stored when the server stops, and the client's read,
sent again to the new server before the processor's rewrite began there, raises MissingObjects. With a future's
value read under the future's condition (`ScalerFuture._value_lock` returning `_condition`), the far case's wait for
the announcement often waits behind the client's early read of the held result until the server's stall sweep ends
the write (57 s), and the read that follows may raise MissingObjects ("its writer stopped mid-write"):
tests/unit/test_eager_reads.py's test_waiting_on_a_future_does_not_wait_for_its_early_read fails so every time.
"""

from __future__ import annotations

import concurrent.futures
import signal
from pathlib import Path

import pytest

from scaler import Client
from tests.integration.conftest import COLD_START_SECONDS, Launcher, free_addresses, wait_for_workers
from tests.integration.test_followed_writes import _large, _large_held

pytestmark = pytest.mark.integration

SIZE = 24 << 20
TIMEOUT = 120.0


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("signum", "far"),
    [(signal.SIGKILL, False), (signal.SIGKILL, True), (signal.SIGTERM, False)],
    ids=["SIGKILL", "SIGKILL-far-reader", "SIGTERM"],
)
def test_a_result_announced_while_written_reads_back_through_a_storage_restart(
    launcher: Launcher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int, far: bool
) -> None:
    """`far`: the client as if on another host (it reads in parts, following the write: its read, sent again to the
    restarted server, starts over on the new answer and follows the rewrite)."""
    if far:
        from scaler.object_storage import local_segments

        monkeypatch.setattr(local_segments, "sees", lambda directory: False)
        monkeypatch.setattr(local_segments, "_seen", {})
    addresses = free_addresses()
    spill = ("--spill-directory", str(tmp_path / "spill"))
    storage = launcher.object_storage(addresses.object_storage, *spill)
    storage.wait_for_log("listening on", COLD_START_SECONDS)
    launcher.scheduler(addresses)
    launcher.cluster(addresses.scheduler, 1, "-his", "0.5")
    wait_for_workers(addresses.monitor, 1, COLD_START_SECONDS)
    gate = tmp_path / "gate"
    with Client(address=addresses.scheduler) as client, concurrent.futures.ThreadPoolExecutor(1) as reader:
        future = client.submit(_large_held, SIZE, str(gate))
        done, _ = concurrent.futures.wait([future], timeout=TIMEOUT)
        assert done, "the result was not announced while its write was held"
        reading = reader.submit(future.result, TIMEOUT)  # waits at the server: the object is not stored yet
        storage.popen.send_signal(signum)
        if signum == signal.SIGTERM:
            storage.wait_for_log("being written are stored", TIMEOUT)
            gate.touch()
        storage.wait_exit(TIMEOUT)
        storage = launcher.object_storage(addresses.object_storage, *spill)
        storage.wait_for_log("listening on", COLD_START_SECONDS)
        if signum == signal.SIGKILL:
            assert "being written when a previous server stopped" in storage.log_text()
            gate.touch()
        assert reading.result(TIMEOUT) == _large(SIZE), "the result read back is not the one written"
        assert client.submit(_large, SIZE).result(TIMEOUT) == _large(SIZE), "the processor takes a task again"
