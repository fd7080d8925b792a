"""The agent's side of a processor's channel when the processor dies (`AsyncChannel._close_and_report`): what the
processor wrote before it went is handed on before the end is reported, also when the end shows as a refused write.

A processor that dies with staged tasks unread leaves its agent's socket in error: the agent's next write of a task
fails (EPIPE) before its loop has read the result the processor sent just before dying. That task was then blamed
for the death (`test_staged_tasks.py`'s crash among staged tasks, through the agent, failed about 4 runs in 100 under
load). Checked with the mechanism off (`_close_and_report` closing at once): the refused write's case fails; the
read's case guards the order where the end shows as EOF or ECONNRESET on a read.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.worker.processor.channel import AsyncChannel, encode_frames

pytestmark = pytest.mark.timeout(60)


def _result(number: int) -> m.TaskResult:
    return m.TaskResult(TaskID(bytes([number]) * 32), m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"r")


def _dead_processor_that_wrote(results: list[m.TaskResult]) -> socket.socket:
    """The agent's end of a channel whose processor wrote `results`, then ended with a task it never read."""
    processor_end, agent_end = socket.socketpair()
    agent_end.sendall(encode_frames([b"a task the processor never read"]))
    processor_end.sendall(encode_frames([codec.encode(result) for result in results]))
    processor_end.close()
    return agent_end


@pytest.mark.parametrize("ended_by", ["a refused write", "a read"])
def test_a_dead_processors_last_results_are_heard_before_its_end(ended_by: str) -> None:
    sent = [_result(1), _result(2)]
    heard: list[object] = []
    loop = asyncio.new_event_loop()
    try:
        channel = AsyncChannel(
            loop,
            _dead_processor_that_wrote(sent),
            lambda frames: heard.extend(codec.decode(frame) for frame in frames),
            lambda: heard.append("closed"),
        )
        if ended_by == "a refused write":
            channel.hold([b"the next staged task"])
            channel.flush()  # refused: the processor is gone
        else:
            channel._readable()
            channel._readable()
        assert heard == [*sent, "closed"], f"heard {heard}: a result sent before the death was lost"
    finally:
        loop.close()
