"""The scaler_top screen as text: sections, the worker table and its sorting, staleness, decisions."""

from __future__ import annotations

from dataclasses import replace

from scaler.monitor.top import TopState
from scaler.monitor.top_screen import Sorting, render, worker_label
from scaler.protocol import messages as m


def worker(name: str, cpu: float, queued: int, manager: str = "local", pid: int = 1) -> m.WorkerSummary:
    processors = (m.ProcessorStatus(pid + 1000, cpu_percent=cpu, rss_bytes=50 << 20),)
    return m.WorkerSummary(
        worker_id=f"Worker|NAT-unit|{name}".encode(), manager_id=manager, capacity=10, assigned=3,
        status=m.WorkerStatus(queued=queued, processors=processors), cpu_percent=1.5, rss_bytes=30 << 20,
        hostname="host", pid=pid, lag_seconds=0.0021,
    )  # fmt: skip


def snapshot(*workers: m.WorkerSummary) -> m.StatusSnapshot:
    stats = m.SchedulerStats(cpu_percent=2.5, rss_bytes=100 << 20, queued=4, running=2, succeeded=500, failed=1)
    counts = (m.MessageCount("Task", sent=510, received=505), m.MessageCount("Heartbeat", received=40))
    client = m.ClientSummary(b"Client|abc", counts=m.TaskCounts(queued=4, running=2, succeeded=500, failed=1))
    function = m.FunctionSummary("square", m.TaskCounts(running=2, succeeded=500))
    return m.StatusSnapshot(
        time=1.0, scheduler=stats, workers=workers, clients=(client,), functions=(function,), message_counts=counts
    )


def table_rows(lines: list[str]) -> list[str]:
    start = next(index for index, line in enumerate(lines) if line.startswith("Total "))
    return lines[start + 2 : start + 2 + int(lines[start].split()[1])]


def test_the_header_shows_the_scheduler_the_task_states_and_the_messages() -> None:
    lines = render(snapshot(worker("aaa", 1, 0)), [], Sorting(), "tcp://x:8518")
    text = "\n".join(lines)
    for expected in ("scheduler", "task_manager", "scheduler_sent", "scheduler_received", "cpu   2.5%",
                     "success     500", "unassigned       4", "Task     510", "Heartbeat      40"):  # fmt: skip
        assert expected in text, expected
    assert "Total 1 worker(s)" in lines
    assert "square" in text and "scaling decisions" not in text


def test_the_worker_table_sorts_by_the_pressed_column_and_the_same_key_reverses() -> None:
    status = snapshot(worker("aaa", 5, 7, pid=1), worker("bbb", 50, 1, pid=2), worker("ccc", 20, 3, pid=3))
    by_name = table_rows(render(status, [], Sorting(), "a"))
    assert [row.split()[0] for row in by_name] == ["1|host|aaa+", "2|host|bbb+", "3|host|ccc+"]
    by_cpu = Sorting().press("c")
    assert by_cpu == Sorting("c", descending=True)
    assert [row.split()[0] for row in table_rows(render(status, [], by_cpu, "a"))] == [
        "2|host|bbb+", "3|host|ccc+", "1|host|aaa+",
    ]  # fmt: skip
    assert by_cpu.press("c") == Sorting("c", descending=False)
    header = render(status, [], by_cpu, "a")
    assert any("[cpu]" in line and "worker" in line and "[worker]" not in line for line in header)
    assert Sorting().press("x") == Sorting(), "an unknown key changes nothing"


def test_a_silent_scheduler_is_named_and_decisions_show_their_reason() -> None:
    decision = m.ScalingDecision("ecs", 0, 8, "412 tasks queued, work policy")
    lines = render(snapshot(), [decision], Sorting(), "tcp://x:8518", silent_seconds=12.4)
    assert lines[0] == "!! no status from tcp://x:8518 for 12 s: the scheduler may be gone"
    assert "  ecs: 0 -> 8 workers: 412 tasks queued, work policy" in lines
    assert render(None, [], Sorting(), "tcp://x:8518")[0].startswith("scaler_top: waiting for the scheduler")


def test_the_spend_rate_shows_when_a_manager_declares_a_worker_cost() -> None:
    assert not any(line.startswith("spend now") for line in render(snapshot(), [], Sorting(), "a"))
    managers = (
        m.ManagerSummary("spot", units=8, worker_cost_per_hour=0.05),
        m.ManagerSummary("fargate", units=5, worker_cost_per_hour=0.2),
        m.ManagerSummary("local", units=3),
    )
    lines = render(replace(snapshot(), managers=managers), [], Sorting(), "a")
    assert "spend now 1.40/hour (spot 8 x 0.05 = 0.40, fargate 5 x 0.2 = 1.00)" in lines


def test_warm_capacity_shows_with_what_it_costs_idle() -> None:
    assert not any(line.startswith("warm capacity") for line in render(snapshot(), [], Sorting(), "a"))
    managers = (
        m.ManagerSummary("spot", units=2, worker_cost_per_hour=0.05, min_workers=2, buffer_workers=1),
        m.ManagerSummary("local", units=3, buffer_workers=4),
    )
    lines = render(replace(snapshot(), managers=managers), [], Sorting(), "a")
    assert "warm capacity: spot min 2 buffer 1 = 0.10/hour idle, local min 0 buffer 4" in lines


def test_the_state_keeps_the_latest_status_and_the_last_decisions() -> None:
    state = TopState()
    state.on_message(snapshot(), now=10.0)
    state.on_message(m.ScalingDecisions(tuple(m.ScalingDecision("a", i, i + 1) for i in range(8))), now=10.5)
    assert [decision.from_workers for decision in state.decisions] == [3, 4, 5, 6, 7]
    assert state.silent_seconds(now=12.0, timeout_seconds=5) is None
    assert state.silent_seconds(now=16.0, timeout_seconds=5) == 6.0
    assert worker_label(worker("xyz9", 0, 0, pid=77)) == "77|host|xyz+"


def test_the_worker_table_shows_memory_against_the_limit_and_marks_a_cgroup_limit() -> None:
    """Checked by switching it off: with the mem/limit/mem% columns removed from COLUMNS the header and the figures
    are missing."""
    under_cgroup = replace(
        worker("aaa", 1, 0),
        status=m.WorkerStatus(memory_bytes=300 << 20, memory_limit_bytes=400 << 20, memory_limit_source="cgroup v1"),
    )
    on_machine = replace(
        worker("bbb", 1, 0, pid=2),
        status=m.WorkerStatus(memory_bytes=100 << 20, memory_limit_bytes=4 << 30, memory_limit_source="machine"),
    )
    lines = render(snapshot(under_cgroup, on_machine), [], Sorting("u"), "tcp://x:8518")
    header = lines[lines.index("Total 2 worker(s)") + 1]
    assert "mem" in header and "limit" in header and "mem%" in header
    low, high = table_rows(lines)  # sorted by mem%
    assert "aaa" in high and "300.0m" in high and "400.0m*" in high and "75%" in high, high
    assert "bbb" in low and "4.0g " in low and "2%" in low and "*" not in low, low
    assert any(line.startswith("mem: the worker's PSS") for line in lines)


def test_the_jobs_kept_by_the_scheduler_are_listed_with_their_progress() -> None:
    job = m.JobSummary("nightly-risk", "running", 12, 50, submitter_connected=False)
    text = "\n".join(render(replace(snapshot(worker("aaa", 1, 0)), jobs=(job,)), [], Sorting(), "a"))
    assert "nightly-risk" in text and "12/50" in text and "gone" in text


def test_a_jobs_row_says_its_failures_owner_key_and_age() -> None:
    job = m.JobSummary("nightly-risk", "running", 12, 50, True, 3, "risk-desk", "rq:Y<7Ib%2", 3725.0)
    text = "\n".join(render(replace(snapshot(worker("aaa", 1, 0)), jobs=(job,)), [], Sorting(), "a"))
    row = next(line for line in text.splitlines() if "nightly-risk" in line)
    assert row.split() == ["nightly-risk", "running", "12/50", "3", "risk-desk", "(connected)", "rq:Y<7Ib%2", "1h02m"]
    header = next(line for line in text.splitlines() if line.split()[:1] == ["job"])
    assert header.split() == ["job", "state", "done", "failed", "owner", "key", "age"]


def test_live_actors_are_listed_with_their_state_and_calls() -> None:
    """Checked to fail with the actors' table left out of the screen."""
    actor = m.ActorSummary(b"\x01" * 16, "Pricer", "", b"Client|c", b"Worker|host|1", "running", 1, 3, 120, 65.0)
    text = "\n".join(render(replace(snapshot(worker("aaa", 1, 0)), actors=(actor,)), [], Sorting(), "a"))
    row = next(line for line in text.splitlines() if "Pricer" in line)
    assert row.split() == ["Pricer", "010101", "running", "Worker|host|1", "1", "3", "120", "1m05s"]


def test_an_away_client_shows_how_long_it_has_been_away_and_its_window() -> None:
    status = snapshot(worker("aaa", 1, 0))
    away = m.ClientSummary(b"Client|laptop", name="laptop", away_seconds=185.0, resume_seconds=1800.0)
    lines = render(replace(status, clients=(*status.clients, away)), [], Sorting(), "a")
    (row,) = [line for line in lines if "laptop" in line]
    assert row.rstrip().endswith("away 3m of 30m")
    assert any(line.rstrip().endswith("connected") for line in lines if "Client|abc"[-3:] in line)


def test_while_no_status_came_the_screen_says_which_address_and_where_the_monitor_is() -> None:
    lines = render(None, [], Sorting(), "ipc:///tmp/elsewhere")
    assert "waiting for the scheduler's status at ipc:///tmp/elsewhere" in lines[0]
    assert "monitor address is" in lines[1] and "port + 2" in lines[1]


def test_waiting_tasks_show_by_capability_set_with_why_they_wait() -> None:
    """docs/guide/failures.md ("the task waits, as `scaler_top` shows why") and sharing.md (the quota's "why pending"
    reason "in `scaler_top`"): walking them, the screen showed neither; the reasons were on the dashboard only.
    Checked to fail with the waiting section left out of the screen."""
    quota = m.PendingGroup((), 98, "98 at their client's quota of running tasks (max_running_tasks); busy", 2, 75.0)
    gpu = m.PendingGroup((("gpu", -1), ("mem", 64)), 3, "no connected worker has the capabilities gpu", 0, 7.0)
    idle = m.PendingGroup((("fpga", -1),), 0, "", 4)  # nothing queued: nothing to explain
    status = replace(snapshot(worker("aaa", 1, 0)), pending=(gpu, idle, quota))
    lines = render(status, [], Sorting(), "a")
    start = next(index for index, line in enumerate(lines) if line.split()[:2] == ["waiting", "tasks"])
    assert lines[start].split() == ["waiting", "tasks", "queued", "running", "oldest", "why"]
    assert lines[start + 1].split()[:5] == ["-", "98", "2", "1m15s", "98"]
    assert lines[start + 1].endswith("98 at their client's quota of running tasks (max_running_tasks); busy")
    assert lines[start + 2].split()[:4] == ["gpu,mem=64", "3", "0", "7s"]
    assert lines[start + 2].endswith("no connected worker has the capabilities gpu")
    assert not any("fpga" in line for line in lines)
    assert not any("waiting tasks" in line for line in render(snapshot(worker("aaa", 1, 0)), [], Sorting(), "a"))


def test_past_five_waiting_capability_sets_the_rest_are_counted() -> None:
    groups = tuple(m.PendingGroup(((f"c{n}", -1),), 10 - n, "busy") for n in range(7))
    lines = render(replace(snapshot(worker("aaa", 1, 0)), pending=groups), [], Sorting(), "a")
    assert sum(1 for line in lines if line.strip().startswith("c") and line.rstrip().endswith("busy")) == 5
    assert any("... and 2 more capability set(s)" in line for line in lines)


def test_units_waiting_in_a_providers_queue_show_with_the_providers_reason() -> None:
    assert not any(line == "units waiting" for line in render(snapshot(), [], Sorting(), "a"))
    waits = (m.UnitWaits("Resources", 2, "no node has 4 free CPUs"), m.UnitWaits("Priority", 1, "Priority"))
    managers = (
        m.ManagerSummary("slurm", units=3, pending_units=3, waits=waits, held="a unit can never start as asked"),
        m.ManagerSummary("local", units=3),
    )
    lines = render(replace(snapshot(), managers=managers), [], Sorting(), "a")
    at = lines.index("units waiting")
    assert lines[at + 1 : at + 3] == [
        "  slurm: 3 unit(s) wait in the provider's queue: 2 Resources (no node has 4 free CPUs), 1 Priority",
        "  slurm: launches held back: a unit can never start as asked",
    ]
