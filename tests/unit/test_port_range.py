"""Free ports from a range of one's own: SCALER_PORT_RANGE narrows what `free_tcp_port_block` hands out, and the
test processes of a run (tests/conftest.py) take disjoint shares, so that two of them never pick the same block."""

from __future__ import annotations

import pytest

from scaler.io.address import PORT_RANGE_VARIABLE, free_tcp_port_block, port_range_share


def bounds(share: str) -> tuple[int, int]:
    low, high = share.split("-")
    return int(low), int(high)


def test_blocks_come_from_the_range_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PORT_RANGE_VARIABLE, "20100-20119")
    for _ in range(50):
        base = free_tcp_port_block(3)
        assert 20100 <= base and base + 2 <= 20119


def test_the_shares_of_a_run_are_disjoint_and_none_is_empty() -> None:
    shares = [bounds(port_range_share(index, 4)) for index in range(4)]
    assert all(low <= high for low, high in shares)
    assert all(shares[i][1] < shares[i + 1][0] for i in range(3))
    assert shares[0][0] >= 10000


@pytest.mark.parametrize("text", ["20000", "a-b", "30000-20000", "0-10"])
def test_a_malformed_range_is_named(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(PORT_RANGE_VARIABLE, text)
    with pytest.raises(ValueError, match=PORT_RANGE_VARIABLE):
        free_tcp_port_block(1)
