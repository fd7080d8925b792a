"""A processor's agent hears that a task ended only once the results the processor began writing are stored (issue 42,
object_storage/followed_put.py): a large result is announced to the scheduler while it is written, and until the
write is done the processor must stay busy to its agent, which would otherwise give it the next task or retire it (a
SIGKILL) mid-write, losing a result the scheduler was told of.

Checked by hand with the mechanism off (`_SettlingChannel.send_all` not overridden): the TaskResult and the ResultSent
reach the agent while the write is still under way, and both tests fail.
"""

from __future__ import annotations

import socket
import threading

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.worker.processor.channel import FrameReader
from scaler.worker.processor.process import _SettlingChannel

TASK = TaskID(b"t" * 16)


def _agent_reads(agent: socket.socket) -> list[bytes]:
    reader = FrameReader()
    agent.settimeout(5)
    return reader.feed(agent.recv(1 << 16))


def test_a_task_end_reaches_the_agent_only_once_the_writes_are_settled() -> None:
    processor_end, agent = socket.socketpair()
    written, settling = threading.Event(), threading.Event()
    order: list[str] = []

    def settle() -> None:
        settling.set()
        assert written.wait(5)
        order.append("settled")

    channel = _SettlingChannel(processor_end, settle)
    try:
        sender = threading.Thread(target=lambda: channel.send(m.ResultSent(TASK, b"frame", 0.5)))
        sender.start()
        assert settling.wait(5), "the channel did not wait for the writes"
        agent.setblocking(False)
        try:
            early = agent.recv(1 << 16)
        except BlockingIOError:
            early = b""
        assert early == b"", "the agent heard of the task's end while its result was being written"
        written.set()
        sender.join(5)
        assert order == ["settled"]
        assert len(_agent_reads(agent)) == 1
    finally:
        processor_end.close()
        agent.close()


def test_other_reports_do_not_wait_and_a_task_result_does() -> None:
    processor_end, agent = socket.socketpair()
    settled: list[type] = []
    channel = _SettlingChannel(processor_end, lambda: settled.append(m.TaskResult))
    try:
        channel.send(m.ProcessorReady(42))
        assert settled == []
        channel.send(m.TaskResult(TASK, m.ResultStatus.CANCELED))
        assert settled == [m.TaskResult]
        assert len(_agent_reads(agent)) == 2
    finally:
        processor_end.close()
        agent.close()
