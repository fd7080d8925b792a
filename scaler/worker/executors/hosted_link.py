"""The link to the scheduler of a processor that lives in its agent's process: an offload proxy's slot (a remote
job at a time), a thread, a simulated processor. As a forked processor's own link (`processor/outlet.py`), it is the
one way its tasks come and everything about them leaves (docs/protocol.md section 3.7); it keeps what every link
keeps (`processor/link_state.py`: its hellos, the results not named read, the tasks held), and its socket is a DEALER
on the agent's event loop, made by the agent's socket factory, with the identity `<worker id>/<processor id>`.

The executor that owns the processor opens the link when its agent configures the processor (the HelloReply it is
sent), hands `on_work` what comes on it (Tasks, TaskCancels, TaskReturns, StreamCredits, ActorStops) and sends what
its processor says (`send`); it closes the link when the processor ends.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable

from scaler.io.sockets import Sockets
from scaler.io.zmq_async import AsyncSocket
from scaler.io.zmq_parts import Frames, joined
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.worker.processor.link_state import Heard, ProcessorLinkState
from scaler.worker.processor.outlet import processor_identity


class HostedLink:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sockets: Sockets,
        scheduler_address: str,
        worker_id: bytes,
        processor_id: bytes,
        on_work: Callable[[list[m.Message]], None],
        max_staged_tasks: int = 0,
    ) -> None:
        info = m.ProcessorInfo(processor_id, worker_id, max_staged_tasks=max_staged_tasks)
        hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(), info)
        self._state = ProcessorLinkState(hello)
        self._on_work = on_work
        identity = processor_identity(worker_id, processor_id)
        self._socket = AsyncSocket(loop, sockets.dealer(scheduler_address, identity=identity), self._heard)

    def configure(self) -> None:
        """Its agent configured the processor (the agent is registered): hello on the link."""
        self._socket.send([codec.encode(self._state.hello())])

    def send(self, messages: list[m.Message]) -> None:
        """What the processor says, in order, in one message."""
        frames = []
        for message in messages:
            frame = codec.encode(message)
            self._state.sent(message, frame)
            frames.append(frame)
        if frames:
            self._socket.send(joined(frames))

    def close(self) -> None:
        self._socket.close()

    def _heard(self, frames: Frames) -> None:
        work: list[m.Message] = []
        for frame in frames:
            try:
                messages = [codec.decode(part) for part in codec.split(bytes(frame))]
            except codec.DecodeError:
                continue
            for message in messages:
                heard = self._state.heard(message)
                if heard is Heard.WORK:
                    work.append(message)
                elif heard is Heard.HELLO:
                    self.configure()
                elif heard is Heard.ACCEPTED:
                    kept, parked = self._state.again()
                    if kept or parked:
                        self._socket.send(joined([*kept, *(codec.encode(message) for message in parked)]))
        if work:
            self._on_work(work)
