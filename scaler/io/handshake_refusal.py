"""What a connecting side says when a server's CURVE handshake refuses it: read from the ZeroMQ socket monitor's
EVENT_HANDSHAKE_FAILED_* events, so a side without keys (or with the wrong ones) is told what is wrong instead of
waiting out a timeout (docs/guide/security.md)."""

from __future__ import annotations

import zmq

#: Connection events that mean the server refused this side's keys (or their absence).
HANDSHAKE_FAILURES = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


def is_mechanism_mismatch(event: int, value: int) -> bool:
    """A side without keys met a CURVE server. Other handshake failures of a plain connection (a server that died
    or restarted mid-handshake) are only a lost connection, which the side waits out."""
    return event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH


def is_refusal(event: int, value: int, has_keys: bool) -> bool:
    """Does this connection event mean the server refused this side (rather than a connection lost)?"""
    return bool(event & HANDSHAKE_FAILURES) and (has_keys or is_mechanism_mismatch(event, value))


def refusal_text(server: str, side: str, address: str, event: int, has_keys: bool, keys_hint: str) -> str:
    """Why `server` ("scheduler") at `address` refused this `side` ("client", "worker"); `keys_hint` says how
    this side takes keys."""
    if not has_keys:
        return (
            f"the {server} at {address} requires CURVE keys (authentication) and this {side} has none (no "
            "connection file of this user names that address: the server runs as another user, on another "
            f"machine, or with keys of its own); {keys_hint}, e.g. those `scaler_keygen export DIR` writes as the "
            "server's user"
        )
    if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return (
            f"authentication failed: the {server} at {address} refused this {side}'s CURVE key (it is not in the "
            "servers' folder of authorised keys, or was removed from it)"
        )
    return (
        f"authentication failed with the {server} at {address}: the CURVE handshake did not complete (a wrong "
        "server key, or a server without CURVE, started with --insecure)"
    )
