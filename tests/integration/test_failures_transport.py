"""The asyncio ZeroMQ shell under peer death, with real sockets in this process: a send that fails
because its peer vanished must not leave the messages of the other peers unread.

ZeroMQ's descriptor is edge-triggered: every operation on the socket, a failed send included, may
consume the readiness edge of messages that arrived meanwhile. A scheduler that lost that edge read
nothing more until its 60 s timeouts fired (found by the mass-cancel test of test_failures_cancel.py:
the probe or reply to a client that had just left consumed the edge of the next client's messages).
"""

from __future__ import annotations

import asyncio
import select
import time
from typing import Any

import pytest
import zmq

from scaler.io.sockets import SocketFactory, bound_endpoint
from scaler.io.zmq_async import AsyncSocket, PeerUnreachable

pytestmark = pytest.mark.integration


async def _eventually(condition: Any, what: str, timeout_seconds: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_seconds:g} s waiting for {what}"
        await asyncio.sleep(0.01)


async def _failed_send_leaves_waiting_messages_readable() -> None:
    loop = asyncio.get_running_loop()
    sockets = SocketFactory()
    router = sockets.router("tcp://127.0.0.1:0", mandatory=True)
    address = bound_endpoint(router)
    descriptor = router.getsockopt(zmq.FD)
    received: list[bytes] = []
    shell = AsyncSocket(loop, router, lambda frames: received.append(bytes(frames[-1])))
    gone = sockets.dealer(address, identity=b"gone")
    talker: zmq.Socket[Any] | None = None
    try:
        # a peer says something, then vanishes; wait until the router has no route to it any more
        gone.send(b"hello from a peer that will vanish")
        await _eventually(lambda: len(received) == 1, "the first peer's message")
        gone.close(linger=0)
        while True:
            try:
                shell.send([b"gone", b"are you there?"])
            except PeerUnreachable:
                break
            await asyncio.sleep(0.01)

        # another peer talks; its first message is read the normal way
        talker = sockets.dealer(address, identity=b"talker")
        talker.send(b"first")
        await _eventually(lambda: received[-1:] == [b"first"], "the talker's first message")

        # without yielding to the loop: the next message arrives (the descriptor turns readable), then a
        # send to the vanished peer fails; it must not swallow the readiness of the waiting message
        talker.send(b"second")
        readable, _, _ = select.select([descriptor], [], [], 10.0)
        assert readable, "the talker's second message never reached the router"
        with pytest.raises(PeerUnreachable):
            shell.send([b"gone", b"still there?"])
        await _eventually(lambda: received[-1:] == [b"second"], "the message that waited during the failed send")
    finally:
        shell.close()
        gone.close(linger=0)
        if talker is not None:
            talker.close(linger=0)
        sockets.close()


@pytest.mark.timeout(30)
def test_send_to_vanished_peer_does_not_leave_other_peers_messages_unread():
    asyncio.run(_failed_send_leaves_waiting_messages_readable())
