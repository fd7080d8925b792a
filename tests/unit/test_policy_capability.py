"""Capability strings (surface.md §5.4) and name-based matching."""

from __future__ import annotations

import pytest

from scaler.policy.capability import (
    capability_names,
    covers,
    format_capabilities,
    needs_more_memory,
    offers_enough,
    parse_capabilities,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ()),
        ("   ", ()),
        ("linux", (("linux", -1),)),
        ("linux,cpu=8", (("cpu", 8), ("linux", -1))),
        (" linux , cpu = 8 ", (("cpu", 8), ("linux", -1))),
        ("gpu=0", (("gpu", 0),)),
        ("gpu=-1", (("gpu", -1),)),
        ("b,a,c=2", (("a", -1), ("b", -1), ("c", 2))),
    ],
)
def test_parse_valid(text: str, expected: tuple[tuple[str, int], ...]) -> None:
    assert parse_capabilities(text) == expected


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("=1", "empty name"),
        ("linux,", "empty name"),
        ("linux,,gpu", "empty name"),
        ("cpu=", "'cpu'"),
        ("gpu=x", "'gpu'"),
        ("gpu=1.5", "'gpu'"),
        ("gpu=-2", "'gpu'"),
        ("gpu,gpu=2", "given twice"),
    ],
)
def test_parse_refuses_and_names_the_item(text: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        parse_capabilities(text)


def test_non_integer_message_says_what_is_allowed() -> None:
    with pytest.raises(ValueError, match=r"'x', which is not an integer"):
        parse_capabilities("linux,gpu=x")


@pytest.mark.parametrize("text", ["", "linux", "cpu=8,linux", "a,b=0,c=3"])
def test_format_round_trips(text: str) -> None:
    assert format_capabilities(parse_capabilities(text)) == text


def test_format_prints_bare_names_for_minus_one() -> None:
    assert format_capabilities((("linux", -1), ("cpu", 8))) == "cpu=8,linux"


def test_covers_compares_names_only() -> None:
    worker = parse_capabilities("linux,gpu=2")
    assert covers(worker, ())
    assert covers(worker, parse_capabilities("gpu=8"))
    assert covers(worker, parse_capabilities("gpu,linux"))
    assert not covers(worker, parse_capabilities("gpu,windows"))
    assert not covers((), parse_capabilities("gpu"))
    assert capability_names(worker) == frozenset({"linux", "gpu"})


def test_memory_is_read_in_bytes_with_units() -> None:
    assert parse_capabilities("memory=8GiB,linux") == (("linux", -1), ("memory", 8 << 30))
    assert parse_capabilities("memory=512MB") == (("memory", 512_000_000),)
    assert parse_capabilities("memory=1024") == (("memory", 1024),)
    assert parse_capabilities("memory") == (("memory", -1),)
    with pytest.raises(ValueError, match=r"'memory'.*'8G'.*GiB"):
        parse_capabilities("memory=8G")
    with pytest.raises(ValueError, match="not an integer"):
        parse_capabilities("cpu=8GiB")  # units are for memory only


def test_covers_compares_the_memory_quantity() -> None:
    """Checked by switching it off: with `covers` comparing names only, the two `not covers` lines fail."""
    big, small = parse_capabilities("linux,memory=8GiB"), parse_capabilities("linux,memory=2GiB")
    needs = parse_capabilities("memory=4GiB")
    assert covers(big, needs) and not covers(small, needs)
    assert not covers(parse_capabilities("linux,memory"), needs)  # no quantity offered: not known to be enough
    assert covers(small, parse_capabilities("memory,linux"))  # no quantity required: names only


def test_a_workers_memory_is_what_it_offers_and_the_floor_is_strict() -> None:
    required = needs_more_memory(parse_capabilities("gpu"), 1 << 30)
    assert required == (("gpu", -1), ("memory", (1 << 30) + 1))
    assert not offers_enough(frozenset({"gpu"}), 1 << 30, required)  # the same size: not bigger
    assert offers_enough(frozenset({"gpu"}), 2 << 30, required)
    assert not offers_enough(frozenset(), 2 << 30, required)  # the other names still count
    assert needs_more_memory(parse_capabilities("memory=8GiB"), 1 << 30) == (("memory", 8 << 30),)
