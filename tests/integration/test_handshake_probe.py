"""A connecting side's first handshake that failed without the server's verdict (EVENT_HANDSHAKE_FAILED_NO_DETAIL) is
a refusal only when a second handshake fails too: a scheduler killed mid-handshake (nothing answers, or a new one
answers) is not a wrong key (security/handshake.py `is_refusal_confirmed`). Real sockets: a CURVE server made here.

Checked with the mechanism off (`is_refusal_confirmed` returning `is_refusal`): the nothing-listens test fails, and
one CI run's nested tasks across a scheduler restart failed with "authentication failed"."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import zmq

from scaler.io.address import free_tcp_port_block
from scaler.security.curve import CurveSecurity
from scaler.security.handshake import handshake_outcome, is_refusal_confirmed

pytestmark = pytest.mark.timeout(60)

NO_DETAIL = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL


@pytest.fixture
def curve_server() -> Iterator[tuple[str, bytes]]:
    """A ROUTER with CURVE on (any client key accepted: no authenticator); its address and public key."""
    public, secret = zmq.curve_keypair()
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.curve_server, router.curve_secretkey = True, secret
    address = f"tcp://127.0.0.1:{free_tcp_port_block(1)}"
    router.bind(address)
    try:
        yield address, public
    finally:
        router.close(linger=0)
        context.term()


def client_keys(server_public: bytes) -> CurveSecurity:
    public, secret = zmq.curve_keypair()
    return CurveSecurity(public, secret, server_public)


def test_a_wrong_server_key_is_a_refusal_confirmed(curve_server: tuple[str, bytes]) -> None:
    address, _ = curve_server
    wrong = client_keys(zmq.curve_keypair()[0])
    assert handshake_outcome(address, wrong, zmq.DEALER) is False
    assert is_refusal_confirmed(NO_DETAIL, 0, address, wrong)


def test_the_right_key_finishes_a_handshake_so_a_failure_was_not_a_refusal(curve_server: tuple[str, bytes]) -> None:
    address, public = curve_server
    right = client_keys(public)
    assert handshake_outcome(address, right, zmq.DEALER) is True
    assert not is_refusal_confirmed(NO_DETAIL, 0, address, right)


def test_nothing_listening_is_no_answer_not_a_refusal() -> None:
    address = f"tcp://127.0.0.1:{free_tcp_port_block(1)}"
    keys = client_keys(zmq.curve_keypair()[0])
    assert handshake_outcome(address, keys, zmq.DEALER, timeout_seconds=0.5) is None
    assert not is_refusal_confirmed(NO_DETAIL, 0, address, keys)
