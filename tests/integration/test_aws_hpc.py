"""`aws_hpc` end to end on the fake cloud: every task an AWS Batch job run as a local process by moto's Batch,
payloads in the job's parameters or in S3, results back through S3; and the faults a Batch user meets.

The fake cloud runs in this process (`fake_cloud` fixture); `AWS_ENDPOINT_URL` points every command at it.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import psutil
import pytest

from scaler import Client
from scaler.config.sections import AWSHPCWorkerManagerConfig
from scaler.errors import DeserializeObjectError, ProcessorDiedError, TaskTimeoutError
from scaler.worker_manager.aws_hpc.job_runner import JOB_PARAMETERS
from scaler.worker_manager.aws_hpc.provision import JOB_COMMAND, provision
from tests.integration.cloud_harness import REGION, cloud_client, wait_for_cloud
from tests.integration.conftest import (
    Addresses,
    Launcher,
    Service,
    kill_tree,
    probe_scheduler,
    running_stack,
    wait_for,
)
from tests.integration.test_launcher import Stack, stack_file

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(240)]

QUEUE, DEFINITION, BUCKET, PREFIX = "scaler-batch-queue", "scaler-batch-job", "scaler-test-tasks", "scaler-tasks"
ACTIVE = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")
_MANAGERS = itertools.count()


def batch_settings(scheduler: str = "tcp://127.0.0.1:1", **overrides: Any) -> AWSHPCWorkerManagerConfig:
    values: dict[str, Any] = dict(
        scheduler_address=scheduler, job_queue=QUEUE, job_definition=DEFINITION, s3_bucket=BUCKET, aws_region=REGION
    )
    values.update(overrides)
    return AWSHPCWorkerManagerConfig(**values)


def jobs_in(*statuses: str, queue: str = QUEUE) -> list[dict[str, Any]]:
    batch = cloud_client("batch")
    return [job for status in statuses for job in batch.list_jobs(jobQueue=queue, jobStatus=status)["jobSummaryList"]]


def running_child_jobs() -> list[str]:
    """Ids of the running jobs that run a task (array parents have no container of their own)."""
    batch = cloud_client("batch")
    ids = [job["jobId"] for job in jobs_in("RUNNING")]
    if not ids:
        return []
    parents = [job["jobId"] for job in batch.describe_jobs(jobs=ids)["jobs"] if "arrayProperties" in job]
    children = [f"{parent}:{index}" for parent in parents for index in range(10)]
    described = batch.describe_jobs(jobs=children)["jobs"] if children else []
    return [job["jobId"] for job in described if job["status"] == "RUNNING"] + [i for i in ids if i not in parents]


def task_objects(bucket: str = BUCKET) -> list[str]:
    s3 = cloud_client("s3")
    return [item["Key"] for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def start_manager(launcher: Launcher, addresses: Addresses, *args: str) -> Service:
    """A manager with an id of its own: the module's scheduler keeps a killed one's registered for a while."""
    return launcher.start(
        "scaler_worker_manager", "aws_hpc", addresses.scheduler, "-q", QUEUE, "-d", DEFINITION, "--s3-bucket", BUCKET,
        "--worker-manager-id", f"batch-{next(_MANAGERS)}", *args,
    )  # fmt: skip


def square(x: int) -> int:
    return x * x


def fail_on_seven(x: int) -> int:
    if x == 7:
        raise ValueError(f"seven is not welcome (got {x})")
    return x


def sleep_then(seconds: float, value: Any) -> Any:
    import time

    time.sleep(seconds)
    return value


def blob_length(blob: bytes) -> int:
    return len(blob)


def make_blob(size: int) -> bytes:
    return bytes(range(256)) * (size // 256)


def refuse_to_load() -> None:
    raise RuntimeError("this object cannot be rebuilt here")


class Unloadable:
    """Pickles fine in the Batch job; unpickling it (in the client) fails."""

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return refuse_to_load, ()


def make_unloadable() -> Unloadable:
    return Unloadable()


def slow_the_first_time(marker: str) -> str:
    """Sleeps for a minute on its first run; returns at once when run again (the marker file says so)."""
    import os
    import time

    if not os.path.exists(marker):
        open(marker, "w").close()
        time.sleep(60)
        return "first attempt"
    return "second attempt"


@pytest.fixture(scope="module")
def addresses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Addresses]:
    """One object storage and scheduler for the module: each test starts a manager of its own on it (a test's
    client takes its unfinished tasks with it when it leaves)."""
    with running_stack(tmp_path_factory.mktemp("stack"), workers=0) as stack:
        yield stack


@pytest.fixture
def batch_cloud(fake_cloud: Any) -> Any:
    """The fake cloud with the queue, job definition and bucket the tests' managers name."""
    provision(batch_settings(), "scaler-batch-job:latest")
    return fake_cloud


def no_batch_leftovers() -> None:
    wait_for_cloud(lambda: not jobs_in(*ACTIVE), "no Batch job to be left queued or running", 60)
    wait_for_cloud(lambda: not task_objects(), "no task object to be left in the bucket", 30)


# ---------------------------------------------------------------- the example file


def test_the_example_file_runs_tasks_as_batch_jobs_and_leaves_nothing_behind(fake_cloud: Any, tmp_path: Path) -> None:
    path, scheduler, _monitor = stack_file(tmp_path, "aws_batch.toml")
    setup = subprocess.run(
        [sys.executable, "-m", "scaler.worker_manager.aws_hpc.provision", str(path)], capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert setup.returncode == 0, setup.stderr
    assert "job queue scaler-batch-queue: created" in setup.stdout
    running = Stack(path, tmp_path / "scaler.log")
    try:
        probe_scheduler(scheduler)
        with Client(address=scheduler, timeout_seconds=60) as client:
            # a few tasks: each is a Batch job whose container makes an environment of its own (fake_cloud/batch.py,
            # about 2 s of CPU a job); what this test adds to scaling_and_cloud.md's walk of the same file (its map
            # of 3) is the remote traceback, the clean-up and the shutdown's cancel of a job in flight
            assert client.map(square, range(3)) == [0, 1, 4]
            with pytest.raises(ValueError, match="seven is not welcome") as raised:
                client.submit(fail_on_seven, 7).result()
            remote = str(raised.value.__cause__)  # the traceback as it was in the Batch job
            assert "Traceback" in remote and "fail_on_seven" in remote
            wait_for_cloud(lambda: not jobs_in(*ACTIVE), "no Batch job to be left queued or running", 60)
            wait_for_cloud(lambda: not task_objects("my-scaler-tasks"), "no task object to be left in the bucket", 30)
            assert len(jobs_in("SUCCEEDED")) >= 1
            client.submit(sleep_then, 120, "interrupted")  # still running when the stack stops
            wait_for_cloud(running_child_jobs, "the last job to run", 120)
            running.remember()
            running.popen.send_signal(signal.SIGTERM)  # the launcher's ordered shutdown
            assert running.popen.wait(timeout=90) == 0
        assert not jobs_in(*ACTIVE), "the stack's shutdown terminates the jobs in flight"
        assert any(job.get("statusReason", "").startswith("Canceled by Scaler") for job in jobs_in("FAILED"))
        assert running.leftovers() == []
    finally:
        if running.popen.poll() is None:
            running.kill_everything()
            running.popen.wait(timeout=30)


# ---------------------------------------------------------------- payloads


def test_payloads_large_and_bad_each_end_as_the_user_expects(
    batch_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    """One manager, in turn: a large argument (through S3) and a large result (through object storage); a result
    the client cannot unpickle (a clear error, and the next task runs); then the bucket gone (the S3 error,
    naming the object)."""
    start_manager(launcher, addresses)
    blob = os.urandom(200_000)  # over the inline limit of a job's parameters, even gzipped
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        assert client.submit(blob_length, blob).result(timeout=120) == 200_000
        assert client.submit(make_blob, 5_000_000).result(timeout=120) == make_blob(5_000_000)
        with pytest.raises(DeserializeObjectError, match=r"result .* could not be deserialized.*cannot be rebuilt"):
            client.submit(make_unloadable).result(timeout=120)
        assert client.submit(square, 5).result(timeout=120) == 25
        no_batch_leftovers()
        boto3.client("s3", region_name=REGION).delete_bucket(Bucket=BUCKET)
        with pytest.raises(Exception, match=rf"AWS Batch refused the job: .*{BUCKET}.*(NoSuchBucket|Not Found)"):
            client.submit(blob_length, blob).result(timeout=120)  # by the proxy in place, or by a new one


# ---------------------------------------------------------------- bad input and faults


def test_a_job_queue_that_does_not_exist_stops_the_manager_with_a_message(batch_cloud: Any, launcher: Launcher) -> None:
    """Refused at start, before the manager reaches for its scheduler (none listens at the address given)."""
    manager = launcher.start(
        "scaler_worker_manager", "aws_hpc", "tcp://127.0.0.1:1", "-q", "no-such-queue", "-d", DEFINITION,
        "--s3-bucket", BUCKET,
    )  # fmt: skip
    assert manager.popen.wait(timeout=60) == 2
    assert "job queue 'no-such-queue' does not exist (--job-queue)" in manager.log_text()


def test_a_job_definition_whose_command_fails_at_start_fails_the_task_naming_the_job(
    batch_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    batch = boto3.client("batch", region_name=REGION)
    resources = [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "2048"}]
    command = ["python3", "-c", "raise SystemExit('no such image')"]
    batch.register_job_definition(
        jobDefinitionName="broken-job", type="container",
        containerProperties={"image": "scaler-batch-job:latest", "command": command, "resourceRequirements": resources},
    )  # fmt: skip
    launcher.start(
        "scaler_worker_manager", "aws_hpc", addresses.scheduler, "-q", QUEUE, "-d", "broken-job", "--s3-bucket", BUCKET
    )
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        with pytest.raises(ProcessorDiedError, match=r"AWS Batch job \S+ FAILED") as raised:
            client.submit(square, 3).result(timeout=120)
    assert "no such image" in str(raised.value)  # the end of the job's log is quoted
    no_batch_leftovers()


def test_an_image_the_cloud_cannot_pull_fails_the_task_with_batchs_reason(
    batch_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    """Checked off: without the fake cloud's image check, the job runs its command (this build, baked into every
    image) and the task returns 9."""
    batch = boto3.client("batch", region_name=REGION)
    resources = [{"type": "VCPU", "value": "1"}, {"type": "MEMORY", "value": "2048"}]
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/not-pushed:latest"
    batch.register_job_definition(
        jobDefinitionName="unpullable-job", type="container", parameters={name: "none" for name in JOB_PARAMETERS},
        containerProperties={"image": image, "command": JOB_COMMAND, "resourceRequirements": resources},
    )  # fmt: skip
    launcher.start("scaler_worker_manager", "aws_hpc", addresses.scheduler, "-q", QUEUE, "-d", "unpullable-job",
                   "--s3-bucket", BUCKET)  # fmt: skip
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        with pytest.raises(ProcessorDiedError, match=r"AWS Batch job \S+ FAILED: CannotPullContainerError: ") as raised:
            client.submit(square, 3).result(timeout=120)
    assert f"{image}: not found" in str(raised.value)
    no_batch_leftovers()


def test_a_bucket_deleted_after_the_manager_started_fails_tasks_instead_of_leaving_them_waiting(
    batch_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    """The first proxy starts after the bucket is gone: it does not exit (its manager would start it again and
    again while the task waited); the task fails naming the bucket."""
    manager = start_manager(launcher, addresses)
    manager.wait_for_log("registered with the scheduler")
    boto3.client("s3", region_name=REGION).delete_bucket(Bucket=BUCKET)
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        with pytest.raises(Exception, match=rf"AWS Batch refused the job: S3 bucket '{BUCKET}' .* is not usable"):
            client.submit(square, 3).result(timeout=120)
    assert "counted as a failed launch" not in manager.log_text()


def test_a_reclaimed_spot_host_runs_the_task_again(
    batch_cloud: Any, addresses: Addresses, launcher: Launcher, tmp_path: Path
) -> None:
    manager = start_manager(launcher, addresses)
    marker = str(tmp_path / "started-once")
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        future = client.submit(slow_the_first_time, marker)
        (job_id,) = wait_for_cloud(lambda: os.path.exists(marker) and running_child_jobs(), "the job to run", 120)
        assert batch_cloud.reclaim_batch_job(job_id)
        assert future.result(timeout=120) == "second attempt"
    described = boto3.client("batch", region_name=REGION).describe_jobs(jobs=[job_id])["jobs"][0]
    assert described["status"] == "FAILED" and described["statusReason"].startswith("Host EC2")
    assert "ERROR" not in manager.log_text()
    no_batch_leftovers()


def test_cancel_and_timeout_terminate_the_remote_jobs(
    batch_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    start_manager(launcher, addresses, "--task-timeout-seconds", "8")
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        cancelled = client.submit(sleep_then, 60, "never")
        wait_for_cloud(running_child_jobs, "the job to run", 120)
        assert cancelled.cancel()
        wait_for_cloud(lambda: not jobs_in(*ACTIVE), "the cancelled job to be terminated", 60)
        timed_out = client.submit(sleep_then, 60, "never")
        with pytest.raises(TaskTimeoutError):
            timed_out.result(timeout=120)
    no_batch_leftovers()
    reasons = [job.get("statusReason", "") for job in jobs_in("FAILED")]
    assert any(reason.startswith("Canceled by Scaler") for reason in reasons), reasons


def test_a_killed_proxy_has_its_jobs_cancelled_and_its_task_runs_again(
    batch_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    start_manager(launcher, addresses)
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        future = client.submit(sleep_then, 6, "done")
        (first_job,) = wait_for_cloud(running_child_jobs, "the job to run", 120)
        (proxy,) = proxies()
        proxy.kill()
        assert future.result(timeout=180) == "done"
    batch = boto3.client("batch", region_name=REGION)
    described = wait_for_cloud(
        lambda: [j for j in batch.describe_jobs(jobs=[first_job])["jobs"] if j["status"] == "FAILED"],
        "the dead proxy's job to be cancelled", 60,
    )  # fmt: skip
    assert "its proxy worker died" in described[0]["statusReason"]
    no_batch_leftovers()


def proxies() -> list[psutil.Process]:
    """The proxy processes among this test's descendants (the manager's units): other processes on a shared
    machine, another test run's proxies among them, are not this test's."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if any("offload.proxy_process" in part for part in process.cmdline()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def job_log(job: dict[str, Any]) -> str:
    stream = job.get("container", {}).get("logStreamName")
    if not stream:
        return ""
    logs = boto3.client("logs", region_name=REGION)
    events = logs.get_log_events(logGroupName="/aws/batch/job", logStreamName=stream, startFromHead=True)["events"]
    return "\n".join(event["message"] for event in events)


def say_then_sleep(seconds: float) -> None:
    import time

    print("the task runs", flush=True)
    time.sleep(seconds)


def test_a_job_whose_manager_is_gone_ends_itself_within_its_lease(
    batch_cloud: Any, addresses: Addresses, launcher: Launcher
) -> None:
    """#28 item 4 for Batch: SIGKILL of the manager and its proxies (the laptop gone) while a job runs its task
    leaves nobody to cancel it; the job ends itself once the lease object its proxy renewed is older than the lease,
    naming the lease, long before its own 10-minute task or the job timeout. Checked by switching it off: with the
    job runner's lease watch not started, the job runs on and the wait for it to end times out."""
    lease_seconds = 8
    manager = start_manager(launcher, addresses, "--lease-seconds", str(lease_seconds))
    batch = boto3.client("batch", region_name=REGION)
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        client.submit(say_then_sleep, 600)
        (job_id,) = wait_for_cloud(running_child_jobs, "the job to run", 120)
        log = batch_cloud.log_directory / "batch" / f"{job_id.replace(':', '-')}.log"
        wait_for(lambda: log.exists() and "the task runs" in log.read_text(), "the job to run its task", 120)
        kill_tree(manager.pid)
        for proxy in proxies():
            proxy.kill()
        (ended,) = wait_for_cloud(
            lambda: [j for j in batch.describe_jobs(jobs=[job_id])["jobs"] if j["status"] in ("FAILED", "SUCCEEDED")],
            "the job to end itself", lease_seconds + 60,
        )  # fmt: skip
    assert ended["status"] == "FAILED", ended
    assert "stopping: its lease was last renewed" in job_log(ended), job_log(ended)
    wait_for_cloud(lambda: not jobs_in(*ACTIVE), "no Batch job to be left queued or running", 60)
    # what the killed proxy left (its lease; no input: the task travelled in the job's parameters) the bucket's
    # lifecycle rule removes
    assert [key for key in task_objects() if "/leases/" not in key] == []
