"""The agent's side of a processor's channel when the processor dies (`AsyncChannel._close_and_report`): what the
processor wrote before it went (its ProcessorReady) is handed on before the end is reported, also when the end shows as
a refused write, so that a processor that started and died at once is not taken for one that failed to start (the
worker gives up after a few of those, at once with a preload). Checked with the mechanism off (`_close_and_report`
closing at once): the refused write's case fails; the read's case guards the order where the end shows as EOF.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.worker.processor.channel import AsyncChannel, encode_frames

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("ended_by", ["a refused write", "a read"])
def test_a_dead_processors_ready_is_heard_before_its_end(ended_by: str) -> None:
    processor_end, agent_end = socket.socketpair()
    processor_end.sendall(encode_frames([codec.encode(m.ProcessorReady(7))]))
    processor_end.close()
    heard: list[object] = []
    loop = asyncio.new_event_loop()
    try:
        channel = AsyncChannel(
            loop,
            agent_end,
            lambda frames: heard.extend(codec.decode(f) for f in frames),
            lambda: heard.append("closed"),
        )
        if ended_by == "a refused write":
            channel.send([codec.encode(m.HelloReply(True))])  # refused: the processor is gone
        else:
            channel._readable()
            channel._readable()
        assert heard == [m.ProcessorReady(7), "closed"], f"heard {heard}: what it sent before the death was lost"
    finally:
        loop.close()
