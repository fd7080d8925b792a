"""Tunnels: ZeroMQ's own byte stream (ZMTP, with CURVE when configured) carried inside TLS or WebSocket, for the
`tls://`, `ws://` and `wss://` addresses. A socket bound or connected at one of them is bound or connected at a
private ipc endpoint of its process instead, and the process's relay (`relay.TunnelRelay`, one thread with an asyncio
loop, made at first use in each process) carries each stream to and from the public address: messages, batching,
identities, disconnect events and security stay ZeroMQ's. docs/architecture.md ("Tunnels") says why, and
docs/protocol.md the WebSocket contract a peer of another language implements."""

from __future__ import annotations


class TunnelError(ConnectionError):
    """A tunnel address that cannot be served or reached, in one line: what is wrong and what to do."""
