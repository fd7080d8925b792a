"""#38 finding 4: the short task ids of reprs and streamed output differ between the tasks of a client (they showed
the process's random prefix, the same for every task). Checked by switching the mechanism off: with
`short_task_id` returning `task_id.hex()[:12]`, every assertion on distinct names fails."""

from __future__ import annotations

from scaler.client.future import ScalerFuture
from scaler.payload.references import NodeResult
from scaler.protocol.ids import TaskID, new_task_id, short_task_id


def test_the_tasks_of_a_process_have_distinct_short_ids() -> None:
    ids = [new_task_id() for _ in range(1000)]
    names = [short_task_id(task_id) for task_id in ids]
    assert len(set(names)) == len(names)
    prefix = ids[0][:2].hex()
    assert names[:2] == [
        f"{prefix}:{int.from_bytes(ids[0][8:], 'big')}",
        f"{prefix}:{int.from_bytes(ids[1][8:], 'big')}",
    ]
    assert short_task_id(b"\x01\x02") == "0102", "an id of another shape: its hex"


def test_reprs_name_each_task_apart() -> None:
    first, second = new_task_id(), new_task_id()
    futures = [ScalerFuture(TaskID(task_id), None, None) for task_id in (first, second)]
    assert repr(futures[0]) != repr(futures[1])
    assert f"task={short_task_id(first)} " in repr(futures[0])
    assert repr(NodeResult(first)) != repr(NodeResult(second))
