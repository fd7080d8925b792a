"""The slow link of `scaler_link` (scaler_rehearsal/fake_cloud/link.py): its model of a direction and its parsing (the
relay's sockets: tests/integration/test_link_relay.py)."""

from __future__ import annotations

import random

import pytest

from scaler_rehearsal.fake_cloud.link import (
    MIN_RTO_SECONDS,
    Bottleneck,
    LinkDirection,
    LinkShape,
    parse_bandwidth,
    parse_routes,
)


def direction(shape: LinkShape, seed: int = 1) -> LinkDirection:
    return LinkDirection(shape, random.Random(seed))


def test_a_chunk_arrives_half_a_round_trip_after_the_link_has_sent_it() -> None:
    link = direction(LinkShape(rtt_seconds=0.040, bandwidth_bits=8_000_000))  # 1 MB/s
    assert link.arrival(1_000, now=10.0) == pytest.approx(10.0 + 0.001 + 0.020)
    # handed over at once, the next chunk waits for the first to be sent: bandwidth, not delay, adds up
    assert link.arrival(1_000, now=10.0) == pytest.approx(10.0 + 0.002 + 0.020)
    assert link.arrival(100_000, now=10.0) == pytest.approx(10.0 + 0.102 + 0.020)
    # an idle link sends at once
    assert link.arrival(1_000, now=20.0) == pytest.approx(20.0 + 0.001 + 0.020)


def test_jitter_spreads_the_delay_but_never_reorders_a_stream() -> None:
    link = direction(LinkShape(rtt_seconds=0.040, jitter_seconds=0.030))
    arrivals = [link.arrival(100, now=0.001 * n) for n in range(2_000)]
    assert arrivals == sorted(arrivals)
    delays = [arrival - 0.001 * n for n, arrival in enumerate(arrivals)]
    assert min(delays) >= 0.020 - 0.015 - 1e-9
    assert max(delays) > 0.030, "some chunks are late by more than half the jitter"


def test_connections_share_the_bandwidth_and_a_loss_stalls_only_its_own() -> None:
    """Two connections one way: the second's chunk waits for the first's to be sent (one access link); a stall of
    the first does not hold the second."""
    bottleneck = Bottleneck()
    first = LinkDirection(LinkShape(rtt_seconds=0.040, bandwidth_bits=8_000_000), random.Random(1), bottleneck)
    second = LinkDirection(LinkShape(rtt_seconds=0.040, bandwidth_bits=8_000_000), random.Random(2), bottleneck)
    assert first.arrival(100_000, now=0.0) == pytest.approx(0.100 + 0.020)
    assert second.arrival(100_000, now=0.0) == pytest.approx(0.200 + 0.020), "behind the first on the same link"
    lossy = LinkShape(rtt_seconds=0.040, loss=0.999)
    shared = Bottleneck()
    stalled = LinkDirection(lossy, random.Random(1), shared)
    clear = LinkDirection(LinkShape(rtt_seconds=0.040), random.Random(1), shared)
    assert stalled.arrival(1_448, now=0.0) == pytest.approx(0.020 + MIN_RTO_SECONDS)
    assert clear.arrival(1_448, now=0.0) == pytest.approx(0.020), "another connection is not held"


def test_a_lost_segment_stalls_the_stream_one_retransmission_timeout() -> None:
    shape = LinkShape(rtt_seconds=0.040, loss=0.5)
    assert shape.rto_seconds == MIN_RTO_SECONDS
    link = direction(shape, seed=3)
    stalls = [link.arrival(1_448, now=float(n)) - float(n) - 0.020 for n in range(1_000)]
    assert set(round(stall, 6) for stall in stalls) == {0.0, MIN_RTO_SECONDS}
    assert 400 < sum(1 for stall in stalls if stall > 0) < 600
    lossless = direction(LinkShape(rtt_seconds=0.040))
    assert all(lossless.arrival(1_448, now=float(n)) == pytest.approx(n + 0.020) for n in range(100))
    assert LinkShape(rtt_seconds=0.3, jitter_seconds=0.05).rto_seconds == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("text", "bits"),
    [("50Mbit", 50e6), ("50 Mbit/s", 50e6), ("1Gbit", 1e9), ("6MB/s", 48e6), ("10MiB/s", 10 * 2**20 * 8),
     ("800kbit", 8e5), ("0", 0.0), ("none", 0.0), ("1.5Mbps", 1.5e6)],
)  # fmt: skip
def test_bandwidths_are_read_in_bits_or_bytes(text: str, bits: float) -> None:
    assert parse_bandwidth(text) == pytest.approx(bits)


def test_bad_settings_are_refused_naming_what_is_wrong() -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 50Mbit"):
        parse_bandwidth("fast")
    with pytest.raises(ValueError, match="loss must be a probability"):
        LinkShape(loss=1.5)
    with pytest.raises(ValueError, match="rtt_seconds"):
        LinkShape(rtt_seconds=-1)
    with pytest.raises(ValueError, match=r"LISTEN=TARGET"):
        parse_routes("tcp://127.0.0.1:9516")
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_routes("tcp://127.0.0.1=tcp://127.0.0.1:8516")


def test_routes_cover_consecutive_ports() -> None:
    routes = parse_routes("tcp://127.0.0.1:9516=tcp://10.0.0.5:8516", ports=3)
    assert [(r.listen_port, r.target_host, r.target_port) for r in routes] == [
        (9516, "10.0.0.5", 8516), (9517, "10.0.0.5", 8517), (9518, "10.0.0.5", 8518),
    ]  # fmt: skip
