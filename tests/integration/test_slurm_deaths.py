"""How a Slurm worker job dies other than by the manager's hand, against the real Slurm of this machine
(tests/integration/slurm_cluster.py): killed for memory, failed on its node, preempted. Each time no task is lost
(they run again within the retry budget), the job's end is named in the manager's log with Slurm's state, and the
manager submits another job for the work that remains.

(An external `scancel` mid-map is in test_slurm_manager.py.) One object storage and scheduler serve the module; each
test has a manager of its own (tests/integration/slurm_harness.py), and the module shares the test process's Slurm
with the other Slurm modules (`xdist_group("slurm")`): a test that takes the node down brings it back however it ends.
"""

from __future__ import annotations

import contextlib
import pwd
import subprocess
from pathlib import Path

import psutil
import pytest

from scaler import Client
from scaler.errors import ProcessorOutOfMemoryError
from tests.integration.conftest import COLD_START_SECONDS, Addresses, wait_for
from tests.integration.slurm_cluster import URGENT_PARTITION, SlurmCluster
from tests.integration.slurm_harness import Manager, manager_fixture, stack_fixture  # noqa: F401 - fixtures used by name

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("slurm"), pytest.mark.timeout(240)]


# ---------------------------------------------------------------- tasks


def nap(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


def allocate_when_told(started: str, go: str, mebibytes: int) -> str:
    """Note the job it runs in (a line of `started` per run), wait for the test's word, then grow by 16 MiB steps
    (touched pages, charged to the job's memory cgroup) to `mebibytes`."""
    import os
    import time
    from pathlib import Path

    job = os.environ.get("SLURM_JOB_ID", "")
    with open(started, "a") as notes:
        notes.write(f"{job}\n")
    while not Path(go).exists():
        time.sleep(0.05)
    held = []
    for _ in range(mebibytes // 16):
        held.append(bytearray(16 << 20))
        time.sleep(0.05)
    return job


def runs_of(started: Path) -> list[str]:
    """The jobs the task ran in, in order."""
    return started.read_text().split() if started.exists() else []


def worker_of_job(cluster: SlurmCluster, job_id: str) -> psutil.Process:
    """The job's batch process: its worker, which the job script `exec`s (its processors are its children)."""
    for pid in cluster.job_processes(job_id):
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            parent = process.parent()
            if parent is not None and parent.name().startswith("slurmstepd"):
                return process
    raise AssertionError(f"no worker process of job {job_id}")


# ---------------------------------------------------------------- tests


def test_a_job_killed_for_memory_ends_out_of_memory_named_and_replaced(
    manager: Manager, stack: Addresses, slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Jobs of 400 MB (`--slurm-memory-per-worker 400M`) on a Slurm that holds a job to its `--mem` (task/cgroup,
    ConstrainRAMSpace: the kernel's OOM killer acts inside the job's memory cgroup). A task grows past it twice:

    1. The first time the kernel kills the job's worker, its batch process (the kernel kills the process of the job
       it scores worst, most often the one holding the memory; the test makes it the worker, with its oom_score_adj,
       so that the job itself dies as when its worker is what grew): the job ends OUT_OF_MEMORY, the manager names
       that end with the end of the job's output (Slurm's "oom-kill event"), and submits another job; the task runs
       again (its worker was lost: a retry).
    2. The second time (another job, no steering) the kernel kills the processor running the task, as it does of
       most tasks past a job's memory: the task fails with ProcessorOutOfMemoryError naming the job's limit, which
       the worker reads from its job's cgroup; it is not run again on a worker of the same size (docs: Monitoring,
       "Out of memory"), and the worker and its job live on.

    The other tasks of the map all succeed. Checked by switching it off: with the fixture's `TaskPlugin=task/none`
    (no memory enforced) the first job never ends OUT_OF_MEMORY and the task succeeds; with `describe_end` of the
    backend's formats returning "" the manager's log does not name the end; with the worker watching the OOM counter of
    its limiting cgroup alone (scaler/worker/memory.py; cgroup v1 counts a kill in the job's task_0) the task's error
    says "died at the worker's memory limit", not the OOM killer."""
    if slurm_cluster.memory_skip_reason is not None:
        pytest.skip(f"the local Slurm does not enforce memory: {slurm_cluster.memory_skip_reason}")
    service = manager.start("-mtc", "2", "--slurm-memory-per-worker", "400M")
    started, go = tmp_path / "started", tmp_path / "go"
    with Client(stack.scheduler) as client:
        hog = client.submit(allocate_when_told, str(started), str(go), 1200)
        naps = [client.submit(nap, 1.0) for _ in range(10)]
        first = wait_for(lambda: runs_of(started)[:1], "the task running in a job", COLD_START_SECONDS)[0]
        worker = worker_of_job(slurm_cluster, first)
        Path(f"/proc/{worker.pid}/oom_score_adj").write_text("1000")  # the OOM killer's first choice in its job
        go.touch()
        wait_for(lambda: manager.states().get(first) == "OUT_OF_MEMORY", f"job {first} to end OUT_OF_MEMORY")
        with pytest.raises(ProcessorOutOfMemoryError) as raised:
            hog.result(timeout=COLD_START_SECONDS)
        runs = runs_of(started)
        assert len(runs) == 2 and runs[1] != first, runs  # ran again in another job, after its worker's death
        assert runs[1] in manager.running(), "the job whose processor the kernel killed lives on"
        text = str(raised.value)
        assert "OOM killer" in text and "limit: 400.0 MiB (cgroup v1)" in text, text
        assert [future.result(timeout=COLD_START_SECONDS) for future in naps] == [1.0] * 10
    assert len(manager.jobs("all")) >= 3, "the job killed for memory was replaced"
    service.wait_for_log(f"unit {first} ended on its own")
    log = service.log_text()
    assert f"(job {first} OUT_OF_MEMORY, reason OutOfMemory" in log, log
    assert "oom-kill event" in log.split(f"(job {first} OUT_OF_MEMORY", 1)[1].splitlines()[0]


def test_a_node_failure_ends_the_jobs_node_fail_named_and_replaced_once_the_node_is_back(
    manager: Manager, stack: Addresses, slurm_cluster: SlurmCluster
) -> None:
    """An administrator sets the node DOWN mid-map (`scontrol update State=DOWN`), as Slurm does a node that stops
    answering: Slurm signals the jobs on it and, the manager's jobs being `--no-requeue`, ends them NODE_FAIL. The
    manager names the end and submits other jobs, which wait for a node (Slurm's reason shows) and run once the node
    is back (RESUME); every task succeeds. Checked by switching it off: without `--no-requeue` in the job script
    Slurm requeues the jobs (the cluster's JobRequeue=1): they wait two minutes on BeginTime, same ids, and never end
    NODE_FAIL."""
    node = slurm_cluster.node
    service = manager.start("-mtc", "2")
    with Client(stack.scheduler) as client:
        futures = [client.submit(nap, 1.0) for _ in range(16)]
        first = wait_for(lambda: len(manager.running()) == 2 and sorted(manager.running()), "two jobs RUNNING")
        wait_for(lambda: sum(future.done() for future in futures) >= 2, "the map under way")
        slurm_cluster.run("scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=scaler test: node failure")
        try:
            wait_for(lambda: all(manager.states().get(job) == "NODE_FAIL" for job in first), "the jobs NODE_FAIL")
            waiting = wait_for(
                lambda: [(job, reason) for job, state, reason in manager.jobs() if state == "PENDING"],
                "another job waiting for the node",
            )
            assert not set(first) & {job for job, _ in waiting}, "the failed jobs are not requeued"
        finally:
            slurm_cluster.run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        assert [future.result(timeout=COLD_START_SECONDS) for future in futures] == [1.0] * 16
    for job in first:
        service.wait_for_log(f"unit {job} ended on its own")
        assert f"(job {job} NODE_FAIL, reason NodeDown" in service.log_text()
    assert len(manager.jobs("all")) >= 3


def test_a_preempted_job_ends_preempted_named_and_replaced(
    manager: Manager, stack: Addresses, slurm_cluster: SlurmCluster
) -> None:
    """Another user's job in a partition of higher PriorityTier (`urgent`: preempt/partition_prio, PreemptMode
    CANCEL) needs the whole node mid-map: Slurm preempts the manager's jobs (SIGTERM: their workers leave and hand
    their tasks back), which end PREEMPTED. The manager names the end and submits other jobs, which wait while the
    other job holds the node and run once it is gone; every task succeeds. Checked by switching it off: with the
    fixture's `PreemptType=preempt/none` the other job waits on Resources and the manager's jobs never end."""
    service = manager.start("-mtc", "2")
    with Client(stack.scheduler) as client:
        futures = [client.submit(nap, 1.0) for _ in range(16)]
        first = wait_for(lambda: len(manager.running()) == 2 and sorted(manager.running()), "two jobs RUNNING")
        wait_for(lambda: sum(future.done() for future in futures) >= 2, "the map under way")
        other = submit_as_another_user(slurm_cluster, f"--partition={URGENT_PARTITION}", "--cpus-per-task=8")
        try:
            wait_for(lambda: all(manager.states().get(job) == "PREEMPTED" for job in first), "the jobs PREEMPTED")
            wait_for(lambda: [job for job, state, _ in manager.jobs() if state == "PENDING"], "another job waiting")
        finally:
            slurm_cluster.run("scancel", other, check=False)  # its user is done: the node is free again
        assert [future.result(timeout=COLD_START_SECONDS) for future in futures] == [1.0] * 16
    for job in first:
        service.wait_for_log(f"unit {job} ended on its own")
        assert f"(job {job} PREEMPTED" in service.log_text()
    assert len(manager.jobs("all")) >= 3


def submit_as_another_user(cluster: SlurmCluster, *options: str) -> str:
    """A job of the `nobody` user (root where there is none) that runs until cancelled; its id."""
    command = ["sbatch", "--parsable", "--job-name=other-user", "--output=/dev/null", "--chdir=/", *options]
    command += ["--wrap", "exec sleep 600"]
    with contextlib.suppress(KeyError):
        pwd.getpwnam("nobody")
        command = ["runuser", "-u", "nobody", "--", *command]
    done = subprocess.run(command, capture_output=True, text=True, env=cluster.environment, timeout=60, check=True)
    return done.stdout.strip().split(";")[0]
