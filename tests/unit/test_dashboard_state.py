"""The dashboard's model of the monitor feed: throughput, task spans and durations, the view the page draws."""

from __future__ import annotations

from dataclasses import replace

from scaler.monitor.dashboard_state import DashboardState
from scaler.protocol import messages as m


def status(wall_time: float, succeeded: int) -> m.StatusSnapshot:
    worker = m.WorkerSummary(b"Worker|NAT-u|abcdef", manager_id="local", capacity=4, hostname="h", pid=7)
    manager = m.ManagerSummary(
        "local", "baremetal_native", max_workers=4, connected_workers=1, target_workers=2, units=3,
        worker_cost_per_hour=0.25,
    )  # fmt: skip
    stats = m.SchedulerStats(succeeded=succeeded, queued=3, object_count=2, object_bytes=2048)
    pending = (m.PendingGroup((("gpu", -1),), 5, "no connected worker has gpu", 0, 3.0),)
    return m.StatusSnapshot(
        time=wall_time, scheduler=stats, workers=(worker,), managers=(manager,), wall_time=wall_time, pending=pending
    )


def transition(task: int, state: str, at: float, worker: bytes = b"") -> m.TaskTransition:
    return m.TaskTransition(task.to_bytes(16, "big"), state, worker, "square", at)


def test_throughput_is_the_finished_tasks_per_second_between_two_statuses() -> None:
    state = DashboardState()
    state.on_message(status(100.0, 10), now=1.0)
    state.on_message(status(102.0, 50), now=3.0)
    assert list(state.throughput) == [(102.0, 20.0)]
    view = state.view(now=4.0)
    assert view["tasks"]["success"] == 50 and view["tasks"]["queued"] == 3
    assert view["workers"][0]["label"] == "7|h|abc+" and view["managers"][0]["target_workers"] == 2
    assert view["managers"][0]["cost_per_hour"] == 0.25 and view["managers"][0]["spend_per_hour"] == 0.75
    assert view["objects"] == {"count": 2, "bytes": 2048} and view["stale_seconds"] == 1.0
    assert view["pending"] == [
        {"capabilities": "gpu", "queued": 5, "running": 0, "why": "no connected worker has gpu", "oldest_seconds": 3.0}
    ]


def test_a_dispatched_task_that_ends_becomes_a_span_and_a_duration() -> None:
    state = DashboardState(spans_kept=2)
    transitions = (
        transition(1, "queued", 10.0), transition(1, "dispatched", 10.5, b"Worker|w1"),
        transition(1, "success", 10.75), transition(2, "dispatched", 11.0, b"Worker|w2"),
        transition(2, "failed", 13.0), transition(3, "success", 14.0),  # never seen dispatched: no span
    )  # fmt: skip
    state.on_message(m.TaskTransitions(transitions), now=0.0)
    assert [(span.worker, span.started, span.ended, span.state) for span in state.spans] == [
        ("Worker|w1", 10.5, 10.75, "success"), ("Worker|w2", 11.0, 13.0, "failed"),
    ]  # fmt: skip
    assert state.durations.observations == 2 and state.durations.total_seconds == 2.25
    assert state.view(now=0.0) == {"connected": False}


def test_decisions_are_kept_latest_last() -> None:
    state = DashboardState(decisions_kept=2)
    state.on_message(m.ScalingDecisions(tuple(m.ScalingDecision("a", i, i + 1, f"r{i}") for i in range(3))), now=0.0)
    state.on_message(status(1.0, 0), now=0.0)
    assert [d["reason"] for d in state.view(now=0.0)["decisions"]] == ["r1", "r2"]


def test_per_worker_metric_series_are_bounded_and_the_rest_summed() -> None:
    """Checked by switching it off: with MAX_WORKER_SERIES not applied there are 105 labels, not 101."""
    from scaler.monitor.metrics import MAX_WORKER_SERIES, worker_families
    from scaler.protocol import messages as m

    workers = tuple(
        m.WorkerSummary(
            worker_id=f"Worker|{index:03d}".encode(),
            status=m.WorkerStatus(memory_bytes=10, memory_limit_bytes=100, running=1),
        )
        for index in range(MAX_WORKER_SERIES + 5)
    )
    memory = next(family for family in worker_families(workers) if family.name == "scaler_worker_memory_bytes")
    labels = {sample.labels["worker"]: sample.value for sample in memory.samples}
    assert len(labels) == MAX_WORKER_SERIES + 1
    assert labels["others"] == 50 and labels["Worker|000"] == 10


def test_the_jobs_of_the_latest_status_are_in_the_view_and_in_jobs() -> None:
    state = DashboardState()
    assert state.jobs() == []
    job = m.JobSummary("nightly", "done", 5, 5, False, 1, "risk-desk", "", 12.5)
    state.on_message(replace(status(100.0, 10), jobs=(job,)), now=1.0)
    expected = {"name": "nightly", "state": "done", "total": 5, "done": 5, "failed": 1, "submitter": "risk-desk",
                "submitter_connected": False, "owner_key": "", "age_seconds": 12.5}  # fmt: skip
    assert state.jobs() == [expected] and state.view(now=2.0)["jobs"] == [expected]


def test_the_live_actors_of_the_latest_status_are_in_the_view_and_in_actors() -> None:
    state = DashboardState()
    assert state.actors() == []
    actor = m.ActorSummary(b"\x02" * 16, "Pricer", "pricer", b"Client|c", b"Worker|w", "running", 0, 2, 9, 3.0)
    state.on_message(replace(status(100.0, 10), actors=(actor,)), now=1.0)
    expected = {"actor": "02" * 16, "class": "Pricer", "name": "pricer", "client": "Client|c", "worker": "Worker|w",
                "state": "running", "restarts": 0, "calls": 2, "calls_done": 9, "age_seconds": 3.0}  # fmt: skip
    assert state.actors() == [expected] and state.view(now=2.0)["actors"] == [expected]


def test_units_waiting_in_a_managers_queue_are_in_the_view_and_the_metrics() -> None:
    import threading

    from scaler.monitor.metrics import metrics_text

    waits = (m.UnitWaits("Resources", 2, "the nodes are busy"), m.UnitWaits("Priority", 1))
    snapshot = status(1.0, 0)
    manager = replace(snapshot.managers[0], manager_id="slurm", waits=waits, held="cap reached")
    state = DashboardState()
    state.on_message(replace(snapshot, managers=(manager,)), now=0.0)
    (shown,) = state.view(now=0.0)["managers"]
    assert shown["waits"] == [
        {"reason": "Resources", "units": 2, "message": "the nodes are busy"},
        {"reason": "Priority", "units": 1, "message": ""},
    ]
    assert shown["held"] == "cap reached"
    text = metrics_text(state, threading.Lock()).decode()
    assert 'scaler_manager_waiting_units{manager="slurm",reason="Resources"} 2.0' in text
    assert 'scaler_manager_waiting_units{manager="slurm",reason="Priority"} 1.0' in text
