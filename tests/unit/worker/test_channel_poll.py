"""A processor reads its channel without blocking before every task's turn passes (processor protocol rule 2), and
the channel is empty then always (its tasks come on its link): `BlockingChannel.poll` asks with poll(0) first and
calls recv only when something is there, since an empty recv raised BlockingIOError, an exception per task.

Checked by hand with the mechanism off (`poll` doing the recv at once, as before): the first test fails (a recv on the
empty channel). The second guards what it must still read.
"""

from __future__ import annotations

import socket

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.worker.processor.channel import BlockingChannel, ChannelClosed, encode_frames

pytestmark = pytest.mark.timeout(60)


class _CountingSocket(socket.socket):
    """A socket that counts its recv calls."""

    recvs = 0

    def recv(self, *args: int) -> bytes:
        _CountingSocket.recvs += 1
        return super().recv(*args)


def _pair() -> tuple[_CountingSocket, socket.socket]:
    processor_end, agent_end = socket.socketpair()
    counting = _CountingSocket(fileno=processor_end.detach())
    return counting, agent_end


def test_an_empty_channel_is_polled_without_a_recv() -> None:
    processor_end, agent_end = _pair()
    channel = BlockingChannel(processor_end)
    try:
        _CountingSocket.recvs = 0
        assert channel.poll() == []
        assert _CountingSocket.recvs == 0
    finally:
        channel.close()
        agent_end.close()


def test_what_the_agent_sent_is_read_and_its_end_is_heard() -> None:
    processor_end, agent_end = _pair()
    channel = BlockingChannel(processor_end)
    try:
        sent: list[m.Message] = [m.ProcessorResume(TaskID(b"t" * 16)), m.TaskCancel((TaskID(b"u" * 16),))]
        agent_end.sendall(encode_frames([codec.encode(message) for message in sent]))
        assert channel.poll() == sent
        agent_end.close()
        with pytest.raises(ChannelClosed):
            channel.poll()
    finally:
        channel.close()
