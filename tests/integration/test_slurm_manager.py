"""`type = "slurm"` against a real Slurm on this machine (tests/integration/slurm_cluster.py): each worker a batch job.

One object storage and scheduler (`scaling=work`) serve the module; each test starts its own manager, with a
manager id (and so a job name) of its own, and leaves no job of it in squeue (tests/integration/slurm_harness.py).
The module shares the test process's Slurm with the other Slurm modules (`xdist_group("slurm")`); how jobs die
otherwise (memory, node failure, preemption) is in test_slurm_deaths.py.
"""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest

from scaler import Client
from tests.integration.conftest import COLD_START_SECONDS, DEADLINE_SECONDS, Addresses, Launcher, monitor, wait_for
from tests.integration.slurm_cluster import SlurmCluster
from tests.integration.slurm_harness import Manager, manager_fixture, stack_fixture  # noqa: F401 - fixtures used by name

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("slurm"), pytest.mark.timeout(240)]


# ---------------------------------------------------------------- tasks


def job_of_task(x: int) -> tuple[int, str | None]:
    import os
    import time

    time.sleep(0.5)
    return x, os.environ.get("SLURM_JOB_ID")


def nap(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


# ---------------------------------------------------------------- tests


def test_tasks_run_inside_jobs_which_scale_up_and_back_to_zero(manager: Manager, stack: Addresses) -> None:
    """Checked by switching it off: with the manager's launches off (a target of 0: `-mtc 0`) no job ever starts and
    the map waits; a worker not started by a job sees no SLURM_JOB_ID."""
    manager.start("-mtc", "3")
    with Client(stack.scheduler) as client:
        started = time.monotonic()
        futures = [client.submit(job_of_task, x) for x in range(12)]
        wait_for(manager.running, "a job of the manager RUNNING", COLD_START_SECONDS, interval=0.1)
        first_job = time.monotonic() - started
        results = [future.result(timeout=COLD_START_SECONDS) for future in futures]
    assert [x for x, _ in results] == list(range(12))
    jobs = {job for _, job in results}
    assert None not in jobs and 1 <= len(jobs) <= 3, jobs  # every task ran in a job, at most -mtc of them at once
    ran = {job_id: state for job_id, state, _ in manager.jobs("all")}
    assert jobs <= ran.keys()
    wait_for(lambda: not manager.jobs(), "the manager's jobs to be gone (back to zero)", DEADLINE_SECONDS)
    back_to_zero = time.monotonic() - started
    assert {manager.jobs("all")[0][1]} <= {"CANCELLED", "COMPLETED"}
    print(f"first job running {first_job:.1f} s after the map; back to zero jobs {back_to_zero:.1f} s after it")


def wait_for_file(path: str) -> str:
    import os
    import time

    while not os.path.exists(path):
        time.sleep(0.1)
    return os.environ.get("SLURM_JOB_ID", "")


def test_an_external_scancel_mid_map_loses_no_task_and_its_end_is_named(
    manager: Manager, stack: Addresses, slurm_cluster: SlurmCluster
) -> None:
    """Checked by switching it off: a worker that does not leave on SIGTERM (killed 5 s later, KillWait) loses its
    task's run, which runs again at a retry's cost; a manager that does not replace the job never starts a third."""
    service = manager.start("-mtc", "2")
    with Client(stack.scheduler) as client:
        futures = [client.submit(nap, 1.0) for _ in range(16)]
        first = wait_for(lambda: len(manager.running()) == 2 and manager.running(), "two jobs RUNNING")
        wait_for(lambda: sum(future.done() for future in futures) >= 2, "the map under way")
        victim = first[0]
        slurm_cluster.run("scancel", victim)
        assert [future.result(timeout=COLD_START_SECONDS) for future in futures] == [1.0] * 16
    assert len(manager.jobs("all")) >= 3, "the cancelled job was replaced"
    service.wait_for_log(f"unit {victim} ended on its own")
    assert f"(job {victim} CANCELLED" in service.log_text()


def test_a_job_pending_on_resources_shows_its_reason_where_a_user_looks(
    manager: Manager, stack: Addresses, tmp_path: Path, launcher: Launcher
) -> None:
    """Four-CPU jobs on an 8-CPU node: two run and the third waits on Resources; at most one may wait
    (--max-waiting-units 1), so the fourth is held back. The reason reaches the scheduler's view, the reason of the
    queued tasks, the scaling decisions of the monitor feed, scaler_top, the dashboard (its state and /metrics) and
    the manager's log. Checked by switching it off: without the cap a fourth job is submitted (two wait); without
    the backend's wait no reason shows."""
    import json
    import urllib.request

    from scaler.io.address import free_tcp_port_block
    from scaler.monitor.feed import FeedReader
    from scaler.monitor.top import TopState
    from scaler.monitor.top_screen import Sorting, render
    from scaler.protocol import messages as m

    service = manager.start("-mtc", "4", "--slurm-cpus-per-worker", "4", "--max-waiting-units", "1")
    release = tmp_path / "release"
    with Client(stack.scheduler) as client:
        futures = [client.submit(wait_for_file, str(release)) for _ in range(4)]
        top, reader = TopState(), FeedReader(stack.monitor)
        try:

            def shown() -> bool:
                message = reader.receive(0.1)
                if message is not None:
                    top.on_message(message, time.monotonic())
                mine = [each for each in top.snapshot.managers if each.manager_id == manager.id] if top.snapshot else []
                resources = mine and [wait.reason for wait in mine[0].waits] == ["Resources"]
                decided = any("1 Resources" in each.reason for each in top.decisions if each.manager_id == manager.id)
                return bool(resources and mine[0].held and decided and len(manager.running()) == 2)

            wait_for(shown, "a job waiting on Resources in the scheduler's view and decisions", COLD_START_SECONDS, 0)
        finally:
            reader.close()
        assert top.snapshot is not None
        (mine,) = [each for each in top.snapshot.managers if each.manager_id == manager.id]
        assert [(wait.reason, wait.units) for wait in mine.waits] == [("Resources", 1)]
        assert "max_waiting_units" in mine.held
        states = sorted(state for _, state, _ in manager.jobs())
        assert states == ["PENDING", "RUNNING", "RUNNING"], "the fourth job is held back by the cap"
        assert any(f"of {manager.id} wait in its provider's queue: Resources" in group.reason
                   for group in top.snapshot.pending)  # fmt: skip
        decisions = [d.reason for d in top.decisions if d.manager_id == manager.id]
        assert any("1 unit(s) wait in the provider's queue: 1 Resources" in reason for reason in decisions), decisions
        screen = render(top.snapshot, list(top.decisions), Sorting(), stack.monitor)
        assert any(line.startswith(f"  {manager.id}: 1 unit(s) wait in the provider's queue: 1 Resources")
                   for line in screen), screen  # fmt: skip
        port = free_tcp_port_block(1)
        dashboard = launcher.start("scaler_gui", stack.monitor, "--gui-address", f"127.0.0.1:{port}", "-bi", "0.2")
        dashboard.wait_for_log("dashboard at", COLD_START_SECONDS)

        def dashboard_shows() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/state", timeout=10) as answer:
                state = json.loads(answer.read())
            shown = [each for each in state.get("managers", ()) if each["id"] == manager.id]
            return bool(shown and [wait["reason"] for wait in shown[0]["waits"]] == ["Resources"])

        wait_for(dashboard_shows, "the dashboard's managers table showing the wait")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
        assert f'scaler_manager_waiting_units{{manager="{manager.id}",reason="Resources"}} 1.0' in metrics
        release.touch()
        assert all(future.result(timeout=COLD_START_SECONDS) for future in futures)
    log = service.log_text()
    assert "1 unit(s) wait in the provider's queue: 1 Resources" in log
    assert isinstance(mine, m.ManagerSummary)


def test_a_job_that_can_never_start_is_named_and_not_submitted_again(
    manager: Manager, stack: Addresses, slurm_cluster: SlurmCluster
) -> None:
    """A partition whose time limit an administrator lowers below the jobs': Slurm leaves the job PENDING for ever
    (PartitionConfig, or PartitionTimeLimit). The manager cancels it, says why, and holds its launches back instead of
    filling the queue. Checked by switching it off: without rule 12 the job stays pending, counted as waiting, and
    nothing says it can never start."""
    service = manager.start("-mtc", "2", "--slurm-partition", "limited", "--slurm-time-limit", "20")
    slurm_cluster.run("scontrol", "update", "PartitionName=limited", "MaxTime=5")
    try:
        with Client(stack.scheduler) as client:
            future = client.submit(nap, 0.1)
            service.wait_for_log("can never start as asked (Partition", COLD_START_SECONDS)
            with monitor(stack.monitor) as next_snapshot:
                for _ in range(3):  # three statuses in a row (seconds of the manager's passes) say it is held

                    def held(snapshot: object) -> bool:
                        mine = [each for each in snapshot.managers if each.manager_id == manager.id]  # type: ignore[attr-defined]
                        return bool(mine and mine[0].held.startswith("a unit can never start as asked"))

                    next_snapshot(held)
            jobs = manager.jobs("all")
            assert len(jobs) == 1 and jobs[0][1] == "CANCELLED", f"submitted once only: {jobs}"
            future.cancel()
    finally:
        slurm_cluster.run("scontrol", "update", "PartitionName=limited", "MaxTime=30")


def test_a_worker_near_its_time_limit_drains_and_hands_its_work_over(manager: Manager, stack: Addresses) -> None:
    """Jobs of one minute (Slurm's shortest limit): each worker drains 40 s before it must be gone (10 s before the
    limit), the manager launches its replacement then, and the worker leaves once its task ends: its job ends
    COMPLETED, not killed at its limit (TIMEOUT), and every task succeeds. Checked by switching it off: without the
    worker's lifetime the first job runs on towards its limit, and the wait for it to end times out."""
    service = manager.start("-mtc", "1", "--slurm-time-limit", "1", "--lifetime-drain-seconds", "40")
    with Client(stack.scheduler) as client:
        futures = [client.submit(nap, 2.0) for _ in range(10)]  # 20 s of work for one worker: past its drain
        assert [future.result(timeout=180) for future in futures] == [2.0] * 10
    jobs = sorted(manager.jobs("all"), key=lambda job: int(job[0]))
    assert len(jobs) >= 2, jobs
    wait_for(lambda: dict((job, state) for job, state, _ in manager.jobs("all"))[jobs[0][0]] != "RUNNING",
             "the first job to end")  # fmt: skip
    first = {job: state for job, state, _ in manager.jobs("all")}[jobs[0][0]]
    assert first == "COMPLETED", f"the first job ended {first}, not by its worker leaving"
    assert f"unit {jobs[0][0]} is reclaimed by its provider" in service.log_text()  # replaced before its end


def test_a_restarted_manager_adopts_its_jobs(manager: Manager, stack: Addresses, tmp_path: Path) -> None:
    """A manager killed while its jobs run, started again with the same id, counts them (squeue by job name) and
    submits none. Checked by switching it off: a backend listing nothing at start makes the second manager submit
    two more jobs."""
    first = manager.start("-mtc", "2")
    release = tmp_path / "release"
    with Client(stack.scheduler) as client:
        futures = [client.submit(wait_for_file, str(release)) for _ in range(2)]
        jobs = wait_for(lambda: len(manager.running()) == 2 and sorted(manager.running()), "two jobs RUNNING")
        first.popen.kill()
        first.wait_exit()
        second = manager.start("-mtc", "2")
        with monitor(stack.monitor) as next_snapshot:
            next_snapshot(lambda s: any(each.manager_id == manager.id and each.units == 2 for each in s.managers))
        release.touch()
        assert {future.result(timeout=COLD_START_SECONDS) for future in futures} <= set(jobs)
    assert sorted(job for job, _, _ in manager.jobs("all")) == jobs, "the second manager submitted no job"
    assert "launching" not in second.log_text()


def test_ctrl_c_of_the_stack_cancels_every_job(slurm_cluster: SlurmCluster, launcher: Launcher, tmp_path: Path) -> None:
    """`scaler FILE` with a Slurm manager, stopped with Ctrl-C while its jobs run: nothing is left in squeue.
    Checked by switching it off: a manager that closes without terminating its units leaves its jobs RUNNING."""
    from scaler.io.address import free_tcp_port_block

    base = free_tcp_port_block(3)
    manager_id = f"t{uuid.uuid4().hex[:8]}"
    stack_file = tmp_path / "slurm.toml"
    stack_file.write_text(
        f'[object_storage_server]\nbind_address = "tcp://127.0.0.1:{base + 1}"\n\n'
        f'[scheduler]\nbind_address = "tcp://127.0.0.1:{base}"\nobject_storage_address = "tcp://127.0.0.1:{base + 1}"\n'
        'policy_content = "allocate=capability; scaling=work; work_tasks_per_worker=1; cooldown_seconds=60"\n\n'
        f'[[worker_manager]]\ntype = "slurm"\nscheduler_address = "tcp://127.0.0.1:{base}"\n'
        f'worker_manager_id = "{manager_id}"\nmax_task_concurrency = 3\n'
        f'slurm_output_folder = "{tmp_path / "jobs"}"\nslurm_poll_seconds = 0.5\n'
    )
    stack = launcher.start("scaler", str(stack_file))
    stack.wait_for_log("registered with the scheduler", COLD_START_SECONDS)
    release = tmp_path / "release"
    with Client(f"tcp://127.0.0.1:{base}") as client:
        futures = [client.submit(wait_for_file, str(release)) for _ in range(3)]
        running = wait_for(
            lambda: [job for job, state, _ in slurm_cluster.jobs(f"scaler-{manager_id}") if state == "RUNNING"],
            "the stack's jobs RUNNING",
        )
        assert running and not any(future.done() for future in futures)
    stack.popen.send_signal(signal.SIGINT)
    assert stack.wait_exit(COLD_START_SECONDS) == 0
    assert slurm_cluster.jobs(f"scaler-{manager_id}") == [], "jobs left in squeue"
    ended = {state for _, state, _ in slurm_cluster.jobs(f"scaler-{manager_id}", "all")}
    assert ended == {"CANCELLED"}, ended
