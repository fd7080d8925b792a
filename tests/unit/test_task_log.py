"""The dashboard's task log (scaler/monitor/task_log.py): paging, sorting by each column, search and filters, the
bound with its dropped count, each worker's running tasks, what each client submitted, and the query's validation.
"""

from __future__ import annotations

import pytest

from scaler.monitor.task_log import SORT_KEYS, QueryError, TaskQuery, TaskTransitionLog, parse_query
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

ALICE, BOB = b"Client|alice|1", b"Client|bob|2"
W1, W2 = b"Worker|NAT|w1", b"Worker|NAT|w2"


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def moved(number: int, state: str, at: float, **fields: object) -> m.TaskTransition:
    base: dict[str, object] = {"worker_id": b"", "function_name": "square", "client_id": ALICE}
    base.update(fields)
    return m.TaskTransition(tid(number), state, wall_time=at, **base)  # type: ignore[arg-type]


def run(log: TaskTransitionLog, number: int, at: float, seconds: float, **fields: object) -> None:
    """A task's whole life: queued, dispatched, ended with a result `seconds` later."""
    worker = fields.pop("worker_id", W1)
    ending = str(fields.pop("state", "success"))
    peak = int(fields.pop("peak", 0))  # type: ignore[call-overload]
    log.on_transition(moved(number, "queued", at, **fields))
    log.on_transition(moved(number, "dispatched", at, worker_id=worker, **fields))
    log.on_transition(
        moved(number, ending, at + seconds, worker_id=worker, run_seconds=seconds, peak_memory_bytes=peak, **fields)
    )


def ids(page: dict[str, object]) -> list[int]:
    return [int(row["task"], 16) for row in page["tasks"]]  # type: ignore[attr-defined]


def mixed_log() -> TaskTransitionLog:
    """Five finished tasks that differ in every column, and one still queued."""
    log = TaskTransitionLog()
    run(log, 1, 100.0, 3.0, function_name="beta", client_id=BOB, worker_id=W2, peak=500)
    run(log, 2, 101.0, 1.0, function_name="alpha", state="failed", peak=900)
    run(log, 3, 102.0, 5.0, function_name="gamma", client_id=BOB, peak=100)
    run(log, 4, 103.0, 2.0, function_name="alpha", worker_id=W2, state="outOfMemory", peak=2000)
    run(log, 5, 104.0, 4.0, function_name="delta")
    log.on_transition(moved(6, "queued", 105.0, function_name="epsilon"))
    return log


def test_pages_walk_every_task_newest_first_and_total_counts_them_all() -> None:
    log = TaskTransitionLog()
    for number in range(1, 1201):  # past the 500 the dashboard used to keep
        run(log, number, float(number), 0.5)
    first = log.query(TaskQuery(limit=100))
    assert first["total"] == 1200 and first["held"] == 1200 and ids(first) == list(range(1200, 1100, -1))
    seen: list[int] = []
    for offset in range(0, 1200, 250):
        seen += ids(log.query(TaskQuery(offset=offset, limit=250, order="asc")))
    assert seen == list(range(1, 1201))
    assert log.query(TaskQuery(offset=1200))["tasks"] == []


@pytest.mark.parametrize(
    ("sort", "ascending", "descending"),
    [  # ties keep the order first seen either way; a task without the value is last either way
        ("client", [2, 4, 5, 6, 1, 3], [1, 3, 2, 4, 5, 6]),
        ("function", [2, 4, 1, 5, 6, 3], [3, 6, 5, 1, 2, 4]),
        ("state", [2, 4, 6, 1, 3, 5], [1, 3, 5, 6, 4, 2]),
        ("worker", [6, 2, 3, 5, 1, 4], [1, 4, 2, 3, 5, 6]),  # the queued task has no worker yet: ""
        ("duration", [2, 4, 1, 5, 3, 6], [3, 5, 1, 4, 2, 6]),  # 6 was never dispatched
        ("peak_memory", [3, 1, 2, 4, 5, 6], [4, 2, 1, 3, 5, 6]),  # 5 and 6 were not measured
        ("submitted", [1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]),
        ("task", [1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]),
    ],
)
def test_each_column_sorts_both_ways(sort: str, ascending: list[int], descending: list[int]) -> None:
    log = mixed_log()
    assert ids(log.query(TaskQuery(sort=sort, order="asc"))) == ascending
    assert ids(log.query(TaskQuery(sort=sort, order="desc"))) == descending
    assert ids(log.query(TaskQuery(sort=sort, order="asc", offset=2, limit=3))) == ascending[2:5], "sorted, then paged"


def test_search_finds_text_in_any_column_and_filters_match_exactly() -> None:
    log = mixed_log()
    assert ids(log.query(TaskQuery(q="ALPHA", order="asc"))) == [2, 4]
    assert ids(log.query(TaskQuery(q="bob", order="asc"))) == [1, 3]
    assert ids(log.query(TaskQuery(q="w2", order="asc"))) == [1, 4]
    assert ids(log.query(TaskQuery(q=tid(5).hex()[-6:]))) == [5]
    assert ids(log.query(TaskQuery(state="live"))) == [6]
    assert ids(log.query(TaskQuery(state="finished", order="asc"))) == [1, 2, 3, 4, 5]
    assert ids(log.query(TaskQuery(state="outOfMemory"))) == [4]
    assert ids(log.query(TaskQuery(client=BOB.decode(), worker=W1.decode()))) == [3]
    assert ids(log.query(TaskQuery(function="alpha", sort="peak_memory"))) == [4, 2]
    assert log.query(TaskQuery(function="alph"))["total"] == 0, "filters match whole values, search finds parts"


def test_the_bound_lets_the_first_finished_go_first_and_counts_them() -> None:
    """Checked by switching the bound off (no _drop_one): held grew to 8 and the assertions failed."""
    log = TaskTransitionLog(max_tasks=5)
    log.on_transition(moved(1, "queued", 1.0))  # live the whole time: kept while finished tasks can go
    log.on_transition(moved(2, "queued", 2.0))
    log.on_transition(moved(2, "dispatched", 2.0, worker_id=W1))
    for number in range(3, 9):
        run(log, number, float(number), 0.1)
    log.on_transition(moved(2, "success", 12.0, worker_id=W1))  # runs while 3 to 8 come and go
    page = log.query(TaskQuery(order="asc"))
    assert page["held"] == 5 and page["dropped"] == 3 and page["total"] == 5
    assert ids(page) == [1, 2, 6, 7, 8], "tasks 3, 4, 5 finished first and went first"
    everything_live = TaskTransitionLog(max_tasks=2)
    for number in range(1, 4):
        everything_live.on_transition(moved(number, "queued", float(number)))
    assert ids(everything_live.query(TaskQuery(order="asc"))) == [2, 3] and everything_live.dropped == 1


def test_feed_drops_are_counted_apart_from_the_bound() -> None:
    log = TaskTransitionLog()
    log.on_transitions(m.TaskTransitions((moved(1, "queued", 1.0),), dropped=7))
    assert log.summary()["feed_dropped"] == 7 and log.summary()["dropped"] == 0


def test_each_worker_shows_its_running_tasks_and_each_client_what_it_submitted() -> None:
    log = TaskTransitionLog()
    for number, worker in ((1, W1), (2, W1), (3, W2)):
        log.on_transition(moved(number, "queued", 1.0, function_name=f"f{number}"))
        log.on_transition(moved(number, "dispatched", 2.0, worker_id=worker, function_name=f"f{number}"))
    log.on_transition(moved(2, "success", 3.0, worker_id=W1, function_name="f2"))
    log.on_transition(moved(3, "queued", 3.0, function_name="f3"))  # back from a lost worker
    log.on_transition(moved(4, "queued", 3.0, function_name="f1", client_id=BOB))
    summary = log.summary()
    assert summary["current"] == {W1.decode(): {"tasks": [{"task": tid(1).hex(), "function": "f1", "started": 2.0}],
                                                "more": 0}}  # fmt: skip
    assert summary["submitted"] == {ALICE.decode(): {"f1": 1, "f2": 1, "f3": 1}, BOB.decode(): {"f1": 1}}
    running = log.query(TaskQuery(sort="duration"))["tasks"]
    assert [row["duration_seconds"] for row in running] == [1.0, 1.0, 1.0, None], "a running task's lasts till now"


def test_the_query_string_is_validated_and_the_error_names_the_parameter() -> None:
    assert parse_query({}) == TaskQuery()
    good = {"offset": ["50"], "limit": ["25"], "sort": ["duration"], "order": ["asc"], "q": ["x"], "state": ["live"]}
    assert parse_query(good) == TaskQuery(50, 25, "duration", "asc", "x", "live")
    assert parse_query({"state": [""], "q": [""]}) == TaskQuery()
    for bad, parameter in [
        ({"offset": ["-1"]}, "offset"),
        ({"limit": ["0"]}, "limit"),
        ({"limit": ["5000"]}, "limit"),
        ({"limit": ["ten"]}, "limit"),
        ({"sort": ["colour"]}, "sort"),
        ({"order": ["up"]}, "order"),
        ({"state": ["sleeping"]}, "state"),
        ({"page": ["2"]}, "page"),
        ({"q": ["a", "b"]}, "q"),
        ({"q": ["x" * 500]}, "q"),
    ]:
        with pytest.raises(QueryError) as raised:
            parse_query(bad)
        assert raised.value.parameter == parameter and str(raised.value).startswith(f"{parameter}: ")
    assert set(SORT_KEYS) >= {"client", "function", "state", "worker", "duration", "peak_memory"}
