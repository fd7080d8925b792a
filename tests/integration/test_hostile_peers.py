"""A bare ZeroMQ peer throws hostile frames at the scheduler and the object storage server before saying hello
(the frame that claims 222 million list elements, mutated and random frames; the peer has the user's client
keys, as the servers are secure by default); each server then answers the next honest peer (bounded waits, no
timing threshold)."""

from __future__ import annotations

import random

import pytest

from scaler import Client
from scaler.object_storage.connection import ObjectStorageConnection
from tests.integration.conftest import Launcher, dealer, probe_scheduler, session_security
from tests.unit.test_hostile_frames import amplification_frame, samples

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def hostile_frames() -> list[bytes]:
    chance = random.Random(7)
    frames = [amplification_frame()] * 5
    for frame in samples():
        for _ in range(50):
            mutated = bytearray(frame)
            mutated[chance.randrange(len(mutated))] ^= 1 << chance.randrange(8)
            frames.append(bytes(mutated))
            frames.append(frame[: chance.randrange(len(frame))])
    frames += [chance.randbytes(chance.randrange(1, 300)) for _ in range(100)]
    return frames


def double(x: int) -> int:
    return 2 * x


def test_servers_answer_honest_peers_after_hostile_frames(launcher: Launcher) -> None:
    addresses, scheduler, storage = launcher.stack(workers=1)
    frames = hostile_frames()
    with dealer(addresses.scheduler) as attacker:
        for frame in frames:
            attacker.send(frame)
    with dealer(addresses.object_storage) as attacker:
        for frame in frames:
            attacker.send(frame)
    probe_scheduler(addresses.scheduler, timeout_seconds=10)
    with Client(address=addresses.scheduler) as client:
        assert client.map(double, range(10)) == [2 * x for x in range(10)]
    connection = ObjectStorageConnection(
        addresses.object_storage, role="readiness-probe", timeout_seconds=10, security=session_security("client")
    )
    try:
        connection.info()
    finally:
        connection.close()
    assert scheduler.is_running() and storage.is_running()
