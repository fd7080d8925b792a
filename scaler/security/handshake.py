"""What a connecting side says when a server's CURVE handshake refuses it: read from the ZeroMQ socket monitor's
EVENT_HANDSHAKE_FAILED_* events, so a side without keys (or with the wrong ones) is told what is wrong instead of
waiting out a timeout (docs/guide/security.md); and when the address serves something else than it expects (a
client at a monitor port, `scaler_top` at a scheduler's), told from the connection file of the address or from
what a probe of the address answers as."""

from __future__ import annotations

from typing import TYPE_CHECKING

import zmq
from zmq.utils.monitor import parse_monitor_message

from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.security.connection_files import MONITOR_SERVICE, SCHEDULER_SERVICE
from scaler.security.key_files import KeyFileError

if TYPE_CHECKING:
    from scaler.security.find import FoundKeys

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


def is_refusal_confirmed(event: int, value: int, address: str, security: TransportSecurity | None) -> bool:
    """A refusal that a second handshake confirms: the server's own verdict on the key (EVENT_HANDSHAKE_FAILED_AUTH)
    stands; a handshake that failed without one may be a server killed mid-handshake (which a fresh handshake
    either completes, with the server back, or gets no answer to), not wrong keys (which fail it again)."""
    if not is_refusal(event, value, security is not None):
        return False
    if security is None or event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return True
    return handshake_outcome(address, security, zmq.DEALER) is False


def refusal_text(server: str, side: str, address: str, event: int, has_keys: bool, keys_hint: str) -> str:
    """Why `server` ("scheduler") at `address` refused this `side` ("client", "worker", "reader"), ending with the
    fix for the common case, keys of another user or machine: what `scaler_keygen export DIR --role ROLE` writes
    as the server's user, given as `keys_hint` says ("give Client(..., curve_secret_key='DIR/client.key_secret',
    ...)": DIR/client.key_secret for the client role, DIR/workers.key_secret for the worker role)."""
    role = "worker" if side == "worker" else "client"
    fix = (
        f"for a scheduler of another user or machine, run `scaler_keygen export DIR --role {role}` as the "
        f"scheduler's user, then {keys_hint}"
    )
    if not has_keys:
        return (
            f"the {server} at {address} requires CURVE keys (authentication) and this {side} has none (no "
            "connection file of this user names that address: the server runs as another user, on another "
            f"machine, or with keys of its own); {fix}"
        )
    if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return (
            f"authentication failed: the {server} at {address} refused this {side}'s CURVE key (it is not in the "
            f"servers' folder of authorised keys, or was removed from it: a cluster with keys of its own takes a key "
            f"its operator authorised); {fix}"
        )
    return (
        f"authentication failed with the {server} at {address}: the CURVE handshake did not complete (a wrong "
        f"server key, such as another user's, or a server without CURVE, started with --insecure); {fix}"
    )


#: What a failed handshake of a connecting side with keys looks like when the server is not of the kind it expects
#: (ZeroMQ refuses a DEALER at a PUB, a SUB at a ROUTER): the same event as a wrong server key.
_NO_DETAIL_FAILURE = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL


def may_be_wrong_service(event: int) -> bool:
    """A handshake failure that a server of another kind at the address also gives (see `answers_as`)."""
    return bool(event & _NO_DETAIL_FAILURE)


def answers_as(address: str, security: TransportSecurity | None, kind: int, timeout_seconds: float = 2.0) -> bool:
    """Does a socket of `kind` (zmq.SUB: is it a monitor feed? zmq.DEALER: a scheduler or an object storage?)
    finish a handshake at `address` with these keys within the timeout? How a side that was refused tells a
    server of another kind from wrong keys; it costs one connection, made only once a handshake failed."""
    return handshake_outcome(address, security, kind, timeout_seconds) is True


def handshake_outcome(
    address: str, security: TransportSecurity | None, kind: int, timeout_seconds: float = 2.0
) -> bool | None:
    """One handshake of a fresh socket of `kind` at `address` with these keys: True finished, False failed, None
    no answer within the timeout (nothing listens there: a server that died mid-handshake and is not back yet)."""
    factory = SocketFactory(security=security)
    watched = zmq.EVENT_HANDSHAKE_SUCCEEDED | HANDSHAKE_FAILURES
    if kind == zmq.SUB:
        sock = factory.subscriber(address, events=watched)
    else:
        sock = factory.dealer(address, identity=b"scaler-port-probe", events=watched)
    events = factory.event_monitor(sock, watched)
    try:
        if not events.poll(int(timeout_seconds * 1000)):
            return None
        event = int(parse_monitor_message(events.recv_multipart())["event"])
        return event == zmq.EVENT_HANDSHAKE_SUCCEEDED
    finally:
        events.close(linger=0)
        sock.close(linger=0)
        factory.close()


def wrong_port_text(keys: FoundKeys, expected: str, side: str, answered: str | None = None) -> str | None:
    """What a `side` ("client", "monitor reader") that expected an `expected` service (SCHEDULER_SERVICE,
    MONITOR_SERVICE) at `keys.address` is told when the address serves another one: from the connection file there
    (what it serves and where the expected service is), else from what a probe found it `answered` as ("a monitor
    feed", "a scheduler or an object storage server"). None: nothing says it is another service."""
    try:
        known = keys.again()
    except KeyFileError:  # the file changed into one that cannot be used: what was read before says it
        known = keys
    text = known.wrong_service(expected)
    if text is None and answered is not None:
        text = f"{keys.address} is {answered}, not a {expected}"
    if text is None:
        return None
    if expected not in known.services:
        text += " (by default a scheduler listens at PORT, its object storage at PORT + 1, its monitor at PORT + 2)"
    give = {SCHEDULER_SERVICE: "Client", MONITOR_SERVICE: "scaler_top and FeedReader"}[expected]
    return f"this {side} was pointed at the wrong port: {text}; give {give} the {expected}'s address"
