"""The worker agent's zygote: a fork server (`scaler.io.fork_server`) forked at the agent's start-up,
before any thread, event loop or ZeroMQ context exists, that forks processors on request.

Each request carries one file descriptor: the processor's end of its channel to the agent (see
`scaler.worker.processor.channel`). Processors are attached children: they die with the zygote, which dies with the
agent, so no processor outlives its worker.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

from scaler.io.child_processes import name_this_process, set_parent_death_signal
from scaler.io.fork_server import ForkServer, serve_forks, socket_pair


class Zygote(ForkServer):
    """The agent's handle on its zygote."""

    @classmethod
    def start(cls, run_processor: Callable[[bytes, socket.socket], int]) -> Zygote:
        """Fork the zygote. `run_processor(processor_id, channel)` runs in each forked processor."""
        owner_end, server_end = socket_pair()
        pid = os.fork()
        if pid == 0:
            owner_end.close()
            code = 1
            try:
                set_parent_death_signal()
                name_this_process("scaler-zygote")
                code = serve_forks(
                    server_end,
                    lambda processor_id, _payload, sockets: run_processor(processor_id, sockets[0]),
                    child_name=lambda _processor_id: "scaler-processor",
                    detached=False,
                )
            finally:
                os._exit(code)
        server_end.close()
        return cls(owner_end, pid)

    def spawn(self, processor_id: bytes) -> socket.socket:
        """Ask for a processor; returns the agent's end of its channel."""
        agent_end, processor_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.request(processor_id, fds=[processor_end.fileno()])
        finally:
            processor_end.close()
        return agent_end
