"""`adoptMany`: several files a peer of the server's host wrote, adopted in one request (issue 40; client_core rule 10).

Each adopt of a batch is carried out as `adopt` alone is, and the batch is answered once, when every one is settled,
with one outcome each in the order asked. The service is played as the server's shell does, with the real disk worker
and files in temporary directories (`Shell` of test_adopt_sent_again.py).

Checked by hand with the mechanism off: with `_Batch.settle` answering at each outcome (not waiting for the others),
the first test gets four answers to its one request; with `_adopt_one` not removing a refused adopt's file
(`refuse_adopt` left out), the refused file stays and the first test fails; with the sweep of `.put` files switched
off (`sweep_put_files` returning at once), the files of the killed client's batch stay and the second test fails.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from scaler.object_storage.segment_directory import PUT_FILE_SECONDS, sweep_put_files
from scaler.object_storage.segment_files import segment_path, write_segment
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    Adopt,
    AdoptMany,
    AdoptOutcomes,
    DeleteOwner,
    Get,
    StorageHello,
    StorageRequest,
    StorageStatus,
)
from tests.unit.test_adopt_sent_again import OWNER, PEER, Shell

FRAMES = (b"a" * 40, b"b" * 24)
SIZE = sum(map(len, FRAMES))


def _written(segments: Path, object_id: bytes, file_name: str, owner: bytes = OWNER) -> Adopt:
    write_segment(os.path.join(segments, file_name), object_id, owner, "argument", FRAMES)
    return Adopt(ObjectID(object_id), owner, file_name, SIZE, "argument")


def _shell(tmp_path: Path) -> tuple[Shell, Path]:
    spill, segments = tmp_path / "spill", tmp_path / "segments"
    spill.mkdir()
    segments.mkdir()
    return Shell(spill, segments), segments


def test_a_batch_with_a_refused_file_adopts_the_others_and_answers_once_for_all(tmp_path: Path) -> None:
    shell, segments = _shell(tmp_path)
    good_1 = _written(segments, b"object-1", "o1.put")
    torn = _written(segments, b"object-2", "o2.put")
    os.truncate(segments / "o2.put", 100)  # its writer was cut short: the file is torn
    good_3 = _written(segments, b"object-3", "o3.put")
    foreign = _written(segments, b"object-4", "o4.put", owner=b"Client|mallory")  # a client stores under its own id
    reply = shell.call(AdoptMany((good_1, torn, good_3, foreign))).answer.reply
    assert reply.status is StorageStatus.OK, reply
    assert isinstance(reply.value, AdoptOutcomes)
    statuses = [outcome.status for outcome in reply.value.outcomes]
    assert statuses == [StorageStatus.OK, StorageStatus.BAD_REQUEST, StorageStatus.OK, StorageStatus.REFUSED]
    assert "torn" in reply.value.outcomes[1].reason and "its own id" in reply.value.outcomes[3].reason
    for object_id in (
        b"object-1",
        b"object-3",
    ):  # (the budget of 100 bytes keeps one in memory: the other is read back)
        assert shell.call(Get(ObjectID(object_id))).answer.reply.status is StorageStatus.OK
    for object_id in (b"object-2", b"object-4"):
        assert not os.path.exists(segment_path(shell.segments, object_id))
        assert shell.call(Get(ObjectID(object_id))).answer.reply.status is StorageStatus.NOT_FOUND
    assert not [name for name in os.listdir(segments) if name.endswith(".put")], "a refused adopt's file is removed"
    shell.close()


def test_a_client_killed_mid_batch_leaves_nothing_behind(tmp_path: Path) -> None:
    """The client wrote four arguments' files, sent the adoption of the first two and was killed: the two adopted
    objects go with its objects when the scheduler clears them (it left), and the two files never asked for go with
    the sweep of `.put` files nobody adopted."""
    shell, segments = _shell(tmp_path)
    adopts = [_written(segments, f"object-{n}".encode(), f"o{n}.put") for n in range(4)]
    reply = shell.call(AdoptMany(tuple(adopts[:2]))).answer.reply
    assert isinstance(reply.value, AdoptOutcomes)
    assert [outcome.status for outcome in reply.value.outcomes] == [StorageStatus.OK] * 2
    assert sorted(name for name in os.listdir(segments) if name.endswith(".put")) == ["o2.put", "o3.put"]
    # the scheduler clears the objects of a client that left (here its hello on the same connection)
    assert _as_scheduler(shell).call(DeleteOwner(OWNER)).answer.reply.value == 2
    swept = sweep_put_files(str(segments), now=time.time() + PUT_FILE_SECONDS + 1)
    assert sorted(os.path.basename(path) for path in swept) == ["o2.put", "o3.put"]
    assert os.listdir(segments) == []
    shell.close()


def _as_scheduler(shell: Shell) -> Shell:
    """The same service, greeted by the scheduler (which clears a departed client's objects)."""
    request_id = shell.next_request
    hello = StorageHello(PROTOCOL_VERSION, "3.11.0", "scheduler")
    answer = shell.service.handle(PEER, encode_storage_request(StorageRequest(request_id, hello)), [])
    assert answer is not None and answer.reply.status is StorageStatus.OK
    shell.next_request += 1
    return shell


@pytest.mark.timeout(30)
def test_a_link_or_a_fifo_named_for_adoption_is_refused_without_blocking_the_server(tmp_path: Path) -> None:
    """A `.put` that is a symbolic link (to another object's file) or a FIFO is refused, and the server does not wait
    on the FIFO for a writer. Checked by hand with the mechanism off: without O_NONBLOCK in `read_head_of_file` the
    server's open of the FIFO blocks (this test times out); without O_NOFOLLOW the link is adopted (its target read as
    the object)."""
    shell, segments = _shell(tmp_path)
    good = _written(segments, b"object-1", "o1.put")
    target = segments / "elsewhere.seg"
    write_segment(str(target), ObjectID(b"object-2"), OWNER, "argument", FRAMES)
    (segments / "o2.put").symlink_to(target)
    os.mkfifo(segments / "o3.put")
    linked = Adopt(ObjectID(b"object-2"), OWNER, "o2.put", SIZE, "argument")
    fifo = Adopt(ObjectID(b"object-3"), OWNER, "o3.put", SIZE, "argument")
    reply = shell.call(AdoptMany((good, linked, fifo))).answer.reply
    assert isinstance(reply.value, AdoptOutcomes)
    assert [o.status for o in reply.value.outcomes] == [StorageStatus.OK] + [StorageStatus.BAD_REQUEST] * 2
    assert "not a regular file" in reply.value.outcomes[2].reason
    assert target.exists() and not (segments / "o2.put").exists() and not (segments / "o3.put").exists()
    assert shell.call(Get(ObjectID(b"object-2"))).answer.reply.status is StorageStatus.NOT_FOUND
    shell.close()
