"""A processor's agent hears that the processor still writes results it announced before it hears that a task ended,
and hears again once those writes are done (issue 42, object_storage/followed_put.py): a large result leaves at
once, through the agent or on the processor's own link, and the agent keeps the processor from new tasks and from
retirement (a SIGKILL) meanwhile (agent/core.py rule 8).

Checked by hand with the mechanism off (`_WritingChannel.send_all` and `settled` as BlockingChannel's, no notice):
the first test fails (no ProcessorWriting before the result, none after the writes).
"""

from __future__ import annotations

import socket

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.worker.processor.channel import FrameReader
from scaler.worker.processor.process import _WritingChannel

TASK = TaskID(b"t" * 16)
RESULT = m.TaskResult(TASK, m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"o" * 32)


class _Agent:
    """The agent's end of the channel: what it has heard so far."""

    def __init__(self, sock: socket.socket) -> None:
        self._socket = sock
        self._reader = FrameReader()
        sock.setblocking(False)

    def heard(self) -> list[m.Message]:
        frames: list[bytes] = []
        while True:
            try:
                data = self._socket.recv(1 << 16)
            except BlockingIOError:
                return [codec.decode(frame) for frame in frames]
            frames += self._reader.feed(data)


def test_a_result_leaves_at_once_after_a_writing_notice_and_the_writes_end_is_told() -> None:
    processor_end, agent_end = socket.socketpair()
    writing = [True]
    channel = _WritingChannel(processor_end, lambda: writing[0])
    agent = _Agent(agent_end)
    try:
        channel.send(m.TaskLog(TASK, m.LogStream.STDOUT, "hi\n"))
        assert agent.heard() == [m.TaskLog(TASK, m.LogStream.STDOUT, "hi\n")], "only a task's end brings the notice"
        channel.send(RESULT)
        assert agent.heard() == [m.ProcessorWriting(True), RESULT]
        sent = m.ResultSent(TaskID(b"u" * 16), b"frame", 0.5)
        channel.send(sent)
        assert agent.heard() == [sent], "told once while the writes go on"
        channel.settled()  # a write ended, another is still under way
        assert agent.heard() == []
        writing[0] = False
        channel.settled()
        assert agent.heard() == [m.ProcessorWriting(False)]
        channel.settled()
        assert agent.heard() == [], "told once that they are done"
    finally:
        processor_end.close()
        agent_end.close()


def test_without_writes_nothing_more_is_said() -> None:
    processor_end, agent_end = socket.socketpair()
    channel = _WritingChannel(processor_end, lambda: False)
    agent = _Agent(agent_end)
    try:
        channel.send_all((m.ProcessorReady(42), RESULT))
        channel.settled()
        assert agent.heard() == [m.ProcessorReady(42), RESULT]
    finally:
        processor_end.close()
        agent_end.close()
