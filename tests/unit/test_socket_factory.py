"""Every ZeroMQ context and socket of `scaler` comes from `scaler.io.sockets` (one place for options and,
with issue 11, CURVE keys). The scan parses the package; it does not import it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import zmq

from scaler.io.sockets import MONITOR_HIGH_WATER_MARK, SocketFactory, bound_endpoint

ROOT = Path(__file__).resolve().parents[2] / "scaler"
FACTORY = ROOT / "io" / "sockets.py"


def socket_making_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name, owner = node.func.attr, node.func.value
        is_context = name == "Context" and isinstance(owner, ast.Name) and owner.id == "zmq"
        is_socket = name == "socket" and node.args and _mentions_zmq(node.args[0])
        if is_context or is_socket or name in ("setsockopt", "instance"):
            found.append(f"{path}:{node.lineno} {name}")
    return found


def _mentions_zmq(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "zmq"


def test_no_module_but_the_factory_makes_zmq_contexts_or_sockets() -> None:
    offending = [call for path in sorted(ROOT.rglob("*.py")) if path != FACTORY for call in socket_making_calls(path)]
    assert not offending, f"make sockets with scaler.io.sockets.SocketFactory: {offending}"


def test_the_scan_sees_a_socket_made_by_hand(tmp_path: Path) -> None:
    sample = tmp_path / "probe.py"
    sample.write_text("import zmq\nc = zmq.Context()\ns = c.socket(zmq.DEALER)\ns.setsockopt(zmq.LINGER, 0)\n")
    assert len(socket_making_calls(sample)) == 3


@pytest.mark.timeout(10)
def test_a_router_and_a_dealer_from_the_factory_talk() -> None:
    sockets = SocketFactory()
    router = sockets.router("tcp://127.0.0.1:0", mandatory=True)
    dealer = sockets.dealer(bound_endpoint(router), identity=b"me")
    try:
        dealer.send(b"ping")
        assert router.poll(5000)
        identity, payload = router.recv_multipart()
        assert (identity, payload) == (b"me", b"ping")
        assert dealer.getsockopt(zmq.LINGER) == 0
    finally:
        router.close()
        dealer.close()
        sockets.close()


def test_the_monitor_publisher_drops_for_slow_subscribers_instead_of_growing() -> None:
    sockets = SocketFactory()
    publisher = sockets.publisher("tcp://127.0.0.1:0")
    try:
        assert publisher.getsockopt(zmq.SNDHWM) == MONITOR_HIGH_WATER_MARK
    finally:
        publisher.close()
        sockets.close()


def test_a_bind_that_fails_closes_its_socket_and_raises() -> None:
    sockets = SocketFactory()
    first = sockets.router("tcp://127.0.0.1:0")
    try:
        with pytest.raises(zmq.ZMQError):
            sockets.router(bound_endpoint(first))
    finally:
        first.close()
        sockets.close()  # would block if the failed socket were left open
