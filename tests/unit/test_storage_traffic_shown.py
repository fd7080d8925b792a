"""Where objects live and move, as `scaler_top`, the dashboard's model and `/metrics` show the status's `storage`: the
storage server's bytes, each host's row and the rest summed, the large objects' copies, the transfers with their rate.

Checked with each mechanism off: `storage_lines` not called by `render` fails the top test; the dashboard's
`storage_view` left out of its view fails the dashboard test; `storage_families` not yielded fails the metrics test.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from scaler.monitor.dashboard_state import DashboardState
from scaler.monitor.metrics import metrics_text
from scaler.monitor.top_screen import STORAGE_ROWS, Sorting, render
from scaler.protocol import messages as m
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import HostTraffic, ObjectCopies, StorageTraffic, Transfer

MiB = 1 << 20
OBJECT = ObjectID(bytes.fromhex("3f2a9c1b0d4e5f60") * 4)


def _row(index: int) -> HostTraffic:
    """host-0 fetched the object from the storage and sent it on; every other host fetched it from another host."""
    from_storage, from_hosts = (20 * MiB, 0) if index == 0 else (0, 20 * MiB)
    return HostTraffic(
        f"host-{index}", f"tcp://10.0.0.{index}:5000", from_storage, from_hosts, from_storage, 0, 1, 20 * MiB
    )


def traffic(hosts: int = 2, sent: int = 20 * MiB) -> StorageTraffic:
    rows = tuple(_row(index) for index in range(min(hosts, 32)))
    on_its_way = Transfer(OBJECT, "host-1", "host-0", 10 * MiB, 20 * MiB, 2.0)
    return StorageTraffic(
        bytes_sent=sent, bytes_sent_to_caches=sent, bytes_received=20 * MiB, host_count=hosts, hosts=rows,
        other_hosts=HostTraffic(bytes_from_hosts=(hosts - len(rows)) * MiB),
        objects=(ObjectCopies(OBJECT, "argument of ndarray", 20 * MiB, 1, 1, 1),), transfers=(on_its_way,),
        transfer_count=1, transfer_bytes_left=10 * MiB,
    )  # fmt: skip


def status(wall_time: float, storage: StorageTraffic) -> m.StatusSnapshot:
    return m.StatusSnapshot(wall_time, m.SchedulerStats(), wall_time=wall_time, storage=storage)


def test_top_shows_the_storage_the_hosts_the_objects_and_the_transfers_with_their_rate() -> None:
    text = "\n".join(render(status(1.0, traffic()), [], Sorting(), "tcp://x:8518"))
    assert "object storage sent 20.0m (20.0m to host caches), received 20.0m; 2 host cache(s); 1 transfer(s)" in text
    assert "host-0        20.0m         0b     20.0m" in text and "host-1           0b      20.0m" in text
    assert "3f2a9c1b0d4e5f60    20.0m           1        1        1  argument of ndarray" in text
    assert "host-1         host-0     10.0m/20.0m    5.0m/s" in text
    assert "object storage sent" not in "\n".join(render(status(1.0, StorageTraffic()), [], Sorting(), "x"))


def test_top_sums_the_hosts_beyond_its_rows() -> None:
    lines = render(status(1.0, traffic(hosts=40)), [], Sorting(), "tcp://x:8518")
    more = [line for line in lines if "more host(s)" in line]
    assert len(more) == 1 and f"... {40 - STORAGE_ROWS} more host(s)" in more[0]
    # the hosts of the status beyond the shown rows (each 20 MiB from other hosts) and the rest the status summed
    assert f"{(32 - STORAGE_ROWS) * 20 + 8}.0m" in more[0]


def test_the_dashboard_view_has_the_storage_and_its_send_rate_between_two_statuses() -> None:
    state = DashboardState()
    state.on_message(status(100.0, traffic(sent=10 * MiB)), now=1.0)
    state.on_message(status(102.0, traffic(sent=30 * MiB)), now=2.0)
    view = state.view(now=2.0)
    assert view["egress"] == [[102.0, 10 * MiB, 10 * MiB]]
    storage = view["storage"]
    assert storage["sent"] == 30 * MiB and storage["host_count"] == 2
    assert [host["host"] for host in storage["hosts"]] == ["host-0", "host-1"]
    assert storage["objects"] == [
        {"object": OBJECT.hex(), "name": "argument of ndarray", "bytes": 20 * MiB, "copies_sent": 1, "hosts": 1,
         "fetching": 1}
    ]  # fmt: skip
    assert storage["transfers"][0] | {"seconds": 0} == {
        "object": OBJECT.hex(), "to": "host-1", "from": "host-0", "done": 10 * MiB, "total": 20 * MiB, "seconds": 0
    }  # fmt: skip


def test_metrics_name_the_storage_each_host_the_rest_summed_and_each_large_object() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    state = DashboardState()
    state.on_message(status(1.0, replace(traffic(hosts=40), bytes_sent=30 * MiB)), now=0.0)
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics_text(state, threading.Lock()).decode())
        for sample in family.samples
    }
    assert samples[("scaler_storage_sent_bytes_total", (("to", "host_caches"),))] == 20 * MiB
    assert samples[("scaler_storage_sent_bytes_total", (("to", "others"),))] == 10 * MiB
    assert samples[("scaler_host_caches", ())] == 40
    assert samples[("scaler_host_received_bytes_total", (("host", "host-0"), ("source", "storage")))] == 20 * MiB
    assert samples[("scaler_host_received_bytes_total", (("host", "others"), ("source", "hosts")))] == 8 * MiB
    assert len([key for key in samples if key[0] == "scaler_host_cache_bytes"]) == 33  # 32 hosts and "others"
    assert samples[("scaler_object_copies_sent_total", (("object", "3f2a9c1b0d4e5f60"),))] == 1
    assert samples[("scaler_object_hosts", (("object", "3f2a9c1b0d4e5f60"), ("state", "fetching")))] == 1
    assert samples[("scaler_transfer_remaining_bytes", ())] == 10 * MiB


def test_the_scheduler_core_publishes_the_storage_traffic_its_shell_read() -> None:
    """The read model's `storage` is what the shell last read from the storage server (view.py): checked by leaving it
    out of the view, which then carries an empty one."""
    from scaler.protocol.handshake import local_python_version
    from scaler.scheduler.core.events import ShellStats
    from scaler.scheduler.core.scheduler_core import CoreSettings, SchedulerCore

    core = SchedulerCore(CoreSettings("s", "o", local_python_version()), strict=True)
    core.handle(ShellStats(1.0, 2, 3, 4, 5, 6, storage=traffic()))
    assert core.view().storage == traffic()


def test_top_and_the_dashboard_count_tasks_placed_near_their_data_and_away() -> None:
    """Checked with each off: `placement_lines` not called by `render` fails the top's part; the view's `placement`
    left out fails the dashboard's."""
    placed = m.StatusSnapshot(1.0, m.SchedulerStats(near_data=7, away_from_data=2), wall_time=1.0)
    text = "\n".join(render(placed, [], Sorting(), "tcp://x:8518"))
    assert "tasks with large inputs: 7 placed near their data, 2 away (the hosts holding their inputs busy)" in text
    assert "tasks with large inputs" not in "\n".join(render(status(1.0, StorageTraffic()), [], Sorting(), "x"))
    state = DashboardState()
    state.on_message(placed, now=1.0)
    assert state.view(now=1.0)["placement"] == {"near_data": 7, "away_from_data": 2}
