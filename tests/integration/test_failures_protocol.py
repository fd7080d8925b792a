"""Hostile and incompatible peers: a hello with another protocol or Python version is refused with a
readable reason, and random or corrupted frames on the scheduler's and object storage's ports are
rejected without taking either down (DESIGN.md sections 2 and 5: "a malformed or hostile frame on any
port gets a logged rejection, not a crash")."""

from __future__ import annotations

import os
import pickle
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol import storage_messages as sm
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ClientID, ObjectID, TaskID
from tests.integration.conftest import (
    DEADLINE_SECONDS,
    client_hello,
    dealer,
    hello_exchange,
    pid_is_alive,
    probe_scheduler,
    running_cluster,
    scheduler_pid,
    storage_pid,
    wait_for,
)

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_failures_protocol")]

FUZZ_SEED = 20261121
FUZZ_MESSAGES = 1000
MAX_FRAME_BYTES = 4096


@pytest.fixture(scope="module")
def logged_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SchedulerClusterCombo, Path]]:
    """A one-worker cluster whose processes log to a file: (cluster, log path)."""
    log = tmp_path_factory.mktemp("protocol") / "cluster.log"
    with running_cluster(1, logging_paths=(str(log),)) as cluster:
        yield cluster, log


def assert_serves_a_client(cluster: SchedulerClusterCombo) -> None:
    """A normal client round trip that also uses object storage (argument and result above the inline limit)."""
    with Client(address=cluster.get_address()) as client:
        assert client.submit(pow, 2, 16).result(timeout=DEADLINE_SECONDS) == 65536
        assert client.submit(len, b"x" * 200_000).result(timeout=DEADLINE_SECONDS) == 200_000
        assert client.submit(bytes, 100_000).result(timeout=DEADLINE_SECONDS) == bytes(100_000)


# ---------------------------------------------------------------- incompatible peers


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("hello", "reason_mentions"),
    [
        (client_hello(protocol_version=m.PROTOCOL_VERSION + 1), f"protocol version {m.PROTOCOL_VERSION + 1}"),
        (client_hello(python_version="2.7.18"), "Python 2.7.18"),
    ],
    ids=["protocol_version", "python_version"],
)
def test_incompatible_hello_is_refused_with_readable_reason_logged_and_scheduler_serves_on(
    logged_cluster, hello, reason_mentions
):
    cluster, log = logged_cluster
    reply = hello_exchange(cluster.get_address(), hello)
    assert reply.accepted is False
    assert reason_mentions in reply.reason
    assert reply.python_version == local_python_version()
    wait_for(lambda: reason_mentions in log.read_text(errors="replace"), "the refusal in the scheduler's log")
    assert_serves_a_client(cluster)


# ---------------------------------------------------------------- fuzzing


def scheduler_templates(identity: bytes) -> list[bytes]:
    """Valid scheduler messages of a peer, to be corrupted (random bytes rarely get past the envelope).
    Tasks name the peer as their client, so that a corrupted one can get through to a worker."""
    task_id, client_id = TaskID(os.urandom(16)), ClientID(identity)
    body = codec.encode_body(
        m.TaskBody(ObjectID(os.urandom(16)), (m.Argument(m.ArgumentKind.INLINE, pickle.dumps(1)),))
    )
    task = m.Task(task_id, client_id, body, "fuzzed", 0, (("cpu", 2),))
    messages: list[m.Message] = [
        client_hello(),
        m.Hello(m.PROTOCOL_VERSION, local_python_version(), 1, "fuzz", m.WorkerInfo((("gpu", -1),), 2, "x", "FIX")),
        m.Heartbeat(1.0, 2, m.WorkerStatus(1, 1, 0, 3)),
        task,
        m.Task(TaskID(os.urandom(16)), client_id, body),
        m.TaskCancel((task_id,)),
        m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"payload"),
        m.TaskCancelConfirm(task_id, m.CancelOutcome.CANCELED),
        m.GraphTask(m.GraphID(os.urandom(16)), client_id, (task,), (task_id,)),
        m.WorkerCapacity(3),
        m.TaskReturn((task_id,)),
        m.ClientDisconnect(False),
        m.ManagerTarget((m.TargetEntry((), 2),)),
    ]
    return [codec.encode(message) for message in messages]


def storage_templates(identity: bytes) -> list[bytes]:
    object_id = ObjectID(os.urandom(32))
    operations: list[sm.StorageOperation] = [
        sm.StorageHello(m.PROTOCOL_VERSION, local_python_version(), "client"),
        sm.Put(object_id, identity, 10, "x"),
        sm.Get(object_id),
        sm.Delete((object_id,)),
        sm.Exists(object_id),
        sm.Info(),
        sm.DeleteOwner(identity),
    ]
    return [codec.encode_storage_request(sm.StorageRequest(n, op)) for n, op in enumerate(operations)]


def random_frame(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(0, MAX_FRAME_BYTES))


def corrupted_frame(rng: random.Random, templates: list[bytes]) -> bytes:
    """A valid message with bytes flipped (anywhere, or in the segment table and root pointer), cut short,
    or extended (by whole words, so that the envelope still parses and the damage reaches the decoder)."""
    frame = bytearray(rng.choice(templates))
    kind = rng.randrange(4)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            frame[rng.randrange(len(frame))] = rng.randrange(256)
    elif kind == 1:
        frame[rng.randrange(min(len(frame), 24))] = rng.randrange(256)
    elif kind == 2:
        del frame[8 * rng.randint(0, len(frame) // 8 - 1) :]
    else:
        frame += rng.randbytes(8 * rng.randint(1, (MAX_FRAME_BYTES - len(frame)) // 8))
    return bytes(frame)


def fuzz(address: str, rng: random.Random, templates_of: Callable[[bytes], list[bytes]]) -> None:
    """From ten raw DEALERs: FUZZ_MESSAGES multipart messages of 1-3 random frames, then as many of 1-3
    corrupted valid messages. Half of the sockets say a valid hello first, so that their garbage reaches
    the handlers of a registered peer."""
    per_socket = FUZZ_MESSAGES // 10
    for number in range(10):
        identity = f"Client|fuzz-{number}-{rng.getrandbits(32)}".encode()
        templates = templates_of(identity)
        with dealer(address, identity=identity) as sock:
            if number % 2 == 0:
                sock.send(templates[0])  # the hello
            for _ in range(per_socket):
                sock.send_multipart([random_frame(rng) for _ in range(rng.randint(1, 3))])
            for _ in range(per_socket):
                sock.send_multipart([corrupted_frame(rng, templates) for _ in range(rng.randint(1, 3))])
            sock.poll(50)  # give the last frames a moment to leave before the socket closes


@pytest.mark.timeout(120)
def test_random_frames_leave_scheduler_and_object_storage_alive_and_serving(logged_cluster):
    cluster, log = logged_cluster
    rng = random.Random(FUZZ_SEED)
    scheduler, storage = scheduler_pid(cluster), storage_pid(cluster)
    fuzz(cluster.get_address(), rng, scheduler_templates)
    fuzz(cluster.object_storage_address, rng, storage_templates)

    probe_scheduler(cluster.get_address())
    assert_serves_a_client(cluster)
    assert pid_is_alive(scheduler)
    assert pid_is_alive(storage)
    text = log.read_text(errors="replace")
    assert "undecodable frame" in text
    assert "bad request" in text
    for symptom in ("Traceback", "failed on", "error while handling"):  # a handler that raised
        assert symptom not in text, text[text.index(symptom) - 2000 : text.index(symptom) + 3000]
