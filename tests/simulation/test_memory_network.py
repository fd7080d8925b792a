"""The in-memory network (`scaler_rehearsal.testing.memory_network`) behaves, where the shells rely on it, as ZeroMQ
does: routing by identity, EHOSTUNREACH on a mandatory ROUTER, messages kept while no ROUTER is bound and delivered to
the next one, connection events with the connection's number as SRCFD, a crash that cuts a component off, topics."""

from __future__ import annotations

import asyncio
import struct

import pytest
import zmq

from scaler.io.zmq_async import AsyncSocket, Frames, PeerUnreachable, watch_events
from scaler_rehearsal.testing.fake_clock import FakeClock
from scaler_rehearsal.testing.memory_network import MemoryNetwork

ADDRESS = "tcp://server.sim:1"


def test_a_dealer_and_a_router_talk_by_identity() -> None:
    network = MemoryNetwork()
    server, peer = network.sockets(), network.sockets()
    router = server.router(ADDRESS, mandatory=True)
    dealer = peer.dealer(ADDRESS, identity=b"alice")
    dealer.send_multipart([b"hello", b"there"])
    assert router.getsockopt(zmq.EVENTS) & zmq.POLLIN
    assert router.recv_multipart() == [b"alice", b"hello", b"there"]
    router.send_multipart([b"alice", b"welcome"])
    assert dealer.recv_multipart() == [b"welcome"]
    with pytest.raises(zmq.Again):
        dealer.recv_multipart(zmq.NOBLOCK)
    with pytest.raises(zmq.ZMQError) as raised:
        router.send_multipart([b"bob", b"nobody"])
    assert raised.value.errno == zmq.EHOSTUNREACH
    server.close()
    peer.close()


def test_what_a_dealer_sends_while_no_router_is_bound_reaches_the_next_one_in_order() -> None:
    network = MemoryNetwork()
    first, peer = network.sockets(), network.sockets()
    first.router(ADDRESS)
    dealer = peer.dealer(ADDRESS, identity=b"alice")
    network.crash(first)  # a SIGKILLed server
    assert not network.is_bound(ADDRESS)
    dealer.send_multipart([b"one"])
    dealer.send_multipart([b"two"])
    second = network.sockets()
    router = second.router(ADDRESS, mandatory=True)
    assert [router.recv_multipart(), router.recv_multipart()] == [[b"alice", b"one"], [b"alice", b"two"]]
    router.send_multipart([b"alice", b"back"])
    assert dealer.recv_multipart() == [b"back"]
    for sockets in (first, second, peer):
        sockets.close()


def test_a_closed_connection_is_an_event_on_both_sides_and_its_number_is_the_frames_srcfd() -> None:
    network = MemoryNetwork()
    server, peer = network.sockets(), network.sockets()
    router = server.router(ADDRESS, mandatory=True)
    router_events = server.event_monitor(router, zmq.EVENT_DISCONNECTED)
    dealer = peer.dealer(ADDRESS, identity=b"alice")
    dealer.send_multipart([b"hi"])
    identity, frame = router.recv_multipart(copy=False)
    connection = frame.get(zmq.SRCFD)
    dealer.close()  # the peer goes: the router hears of it, and cannot route to it any more
    event, value = struct.unpack("=hi", router_events.recv_multipart()[0])
    assert (event, value) == (zmq.EVENT_DISCONNECTED, connection)
    with pytest.raises(zmq.ZMQError):
        router.send_multipart([identity.bytes, b"gone?"])
    other = network.sockets()
    again = other.dealer(ADDRESS, identity=b"carol")
    again_events = other.event_monitor(again, zmq.EVENT_DISCONNECTED)
    network.crash(server)  # the server goes: the dealer hears of it
    assert struct.unpack("=hi", again_events.recv_multipart()[0])[0] == zmq.EVENT_DISCONNECTED
    for sockets in (server, peer, other):
        sockets.close()


def test_a_crashed_component_sends_nothing_more() -> None:
    network = MemoryNetwork()
    server, peer = network.sockets(), network.sockets()
    router = server.router(ADDRESS)
    dealer = peer.dealer(ADDRESS, identity=b"alice")
    network.crash(peer)
    dealer.send_multipart([b"after death"])
    with pytest.raises(zmq.Again):
        router.recv_multipart(zmq.NOBLOCK)
    server.close()
    peer.close()


def test_subscribers_get_the_topics_they_asked_for() -> None:
    network = MemoryNetwork()
    server, reader = network.sockets(), network.sockets()
    publisher = server.publisher(ADDRESS)
    status = reader.subscriber(ADDRESS, topics=(b"status",))
    publisher.send_multipart([b"status", b"1"])
    publisher.send_multipart([b"tasks", b"2"])
    assert status.recv_multipart() == [b"status", b"1"]
    with pytest.raises(zmq.Again):
        status.recv_multipart()
    server.close()
    reader.close()


def test_the_shells_async_sockets_run_on_it_unchanged() -> None:
    """`zmq_async.AsyncSocket` and `watch_events` on memory sockets, on the fake clock's loop: messages arrive one
    loop turn later, a send to a gone peer raises PeerUnreachable, a closed connection is an event."""
    clock, network = FakeClock(), MemoryNetwork()

    async def main() -> tuple[list[Frames], list[int]]:
        loop = asyncio.get_running_loop()
        server, peer = network.sockets(), network.sockets()
        received: list[Frames] = []
        events: list[int] = []
        router_socket = server.router(ADDRESS, mandatory=True)
        router = AsyncSocket(loop, router_socket, received.append)
        monitor = watch_events(loop, server.event_monitor(router_socket, zmq.EVENT_DISCONNECTED),
                               lambda event, value: events.append(event))  # fmt: skip
        dealer = AsyncSocket(loop, peer.dealer(ADDRESS, identity=b"alice"), None)
        dealer.send([b"ping"])
        while not received:
            await clock.sleep(0.001)
        dealer.close()
        while not events:
            await clock.sleep(0.001)
        with pytest.raises(PeerUnreachable):
            router.send([b"alice", b"pong"])
        monitor.close()
        router.close()
        server.close()
        peer.close()
        return received, events

    received, events = clock.run(main())
    assert received == [[b"alice", b"ping"]]
    assert events == [zmq.EVENT_DISCONNECTED]
