"""What a user sees: a map's progress bar, `scaler.progress(futures)`, a failed map item named by index and
arguments, and the reprs (Jupyter tables too) of clients, futures and local clusters."""

from __future__ import annotations

import pytest

import scaler
from scaler import SchedulerClusterCombo
from scaler.client.client import Client

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def double(x: int) -> int:
    return 2 * x


def fails_at_137(x: int) -> int:
    if x == 137:
        raise ValueError("137 is not welcome")
    return x


def test_map_with_progress_draws_a_bar_to_the_end(
    shared_cluster: SchedulerClusterCombo, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(address=shared_cluster.get_address()) as client:
        assert client.map(double, range(300), progress=True) == [2 * x for x in range(300)]  # chunked
        assert client.starmap(double, [(x,) for x in range(20)], progress=True) == [2 * x for x in range(20)]
    err = capsys.readouterr().err
    assert "300/300" in err and "20/20" in err, err


def test_progress_waits_for_any_futures_and_returns_them(
    shared_cluster: SchedulerClusterCombo, capsys: pytest.CaptureFixture[str]
) -> None:
    with Client(address=shared_cluster.get_address()) as client:
        futures = [client.submit(double, x) for x in range(40)] + [client.submit(fails_at_137, 137)]
        returned = scaler.progress(futures)
        assert returned == futures and all(future.done() for future in futures)
        assert [future.result() for future in futures[:40]] == [2 * x for x in range(40)]
        assert isinstance(futures[-1].exception(), ValueError)
    assert "41/41" in capsys.readouterr().err


@pytest.mark.parametrize("items", [300, 20], ids=["chunked", "one-call-per-task"])
def test_a_failed_map_item_is_named_by_index_and_arguments(shared_cluster: SchedulerClusterCombo, items: int) -> None:
    with Client(address=shared_cluster.get_address()) as client:
        with pytest.raises(ValueError, match="137 is not welcome") as raised:
            client.map(fails_at_137, [x if x != 13 else 137 for x in range(items)])
    assert "scaler: map item 13 failed; its arguments: (137,)" in getattr(raised.value, "__notes__", [])


def test_reprs_and_notebook_tables_say_what_a_user_wants_to_know(shared_cluster: SchedulerClusterCombo) -> None:
    address = shared_cluster.get_address()
    assert f"address={address!r}" in repr(shared_cluster) and "running" in repr(shared_cluster)
    assert address in shared_cluster._repr_html_() and "scaler_top" in shared_cluster._repr_html_()
    with Client(address=address) as client:
        ok, bad = client.submit(double, 1), client.submit(fails_at_137, 137)
        ok.result()
        bad.exception()
        assert "state=finished" in repr(ok) and "state=failed: ValueError" in repr(bad)
        assert "<table>" in ok._repr_html_()
        text = repr(client)
        assert f"address={address!r}" in text and "connected" in text and "unfinished_tasks=0" in text
        assert address in client._repr_html_() and "workers" in client._repr_html_()
    assert "disconnected" in repr(client)
