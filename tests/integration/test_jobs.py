"""Jobs that outlive their client (docs/guide/sharing.md, "Jobs"), with real processes: a submitter SIGKILLed
mid-way, a new client reading every result in order, no task run twice; retention; bad names."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
from pathlib import Path

import pytest

from scaler import Client
from scaler.errors import ScalerError
from tests.integration.conftest import wait_for, wait_for_workers

pytestmark = pytest.mark.integration

SUBMITTER = """
import sys, time
from scaler import Client

LOG = sys.argv[2]  # a global of __main__: shipped with the function to the workers

def record(index):
    with open(LOG, "a") as log:
        log.write(f"{index}\\n")
    time.sleep(0.1)
    return index, (b"x" * 70_000 if index % 10 == 0 else b"")  # every tenth result is kept in object storage

client = Client(address=sys.argv[1])
job = client.map_job(record, range(50), name="nightly-risk")
print("submitted", flush=True)
while job.done < 5:
    time.sleep(0.05)
print("midway", flush=True)
time.sleep(600)
"""


def run_log(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.mark.timeout(120)
def test_a_job_outlives_its_sigkilled_client_and_a_new_process_reads_every_result_once(
    make_cluster, processes, tmp_path
):
    """Checked by letting the scheduler cancel a departed client's job tasks (`client_gone` without the job
    exemption): the attach then sees cancelled tasks; and with the submitter's objects deleted when it leaves
    (object_retention_seconds=0 here), the large results could not be read."""
    cluster = make_cluster(2, object_retention_seconds=0)
    wait_for_workers(cluster.monitor_address, 2)
    log = tmp_path / "runs.log"
    submitter = processes.add(
        subprocess.Popen(
            [sys.executable, "-c", SUBMITTER, cluster.get_address(), str(log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
    )
    assert submitter.stdout is not None
    assert submitter.stdout.readline().strip() == b"submitted"
    assert submitter.stdout.readline().strip() == b"midway"
    submitter.kill()
    submitter.wait()
    assert 5 <= len(run_log(log)) < 50, "the job was mid-way when its client died"

    with Client(address=cluster.get_address()) as follower:
        job = follower.job("nightly-risk")
        assert job.total == 50
        results = list(job)
        assert [index for index, _ in results] == list(range(50))
        assert all(len(blob) == (70_000 if index % 10 == 0 else 0) for index, blob in results)
        assert job.progress() == (50, 50)
    with Client(address=cluster.get_address()) as second:  # results stay readable: reading does not free them
        assert sorted(index for index, _ in second.job("nightly-risk").as_completed(timeout=60)) == list(range(50))
    runs = run_log(log)
    assert sorted(runs) == list(range(50)), "every task ran exactly once"


def square(value: int) -> int:
    return value * value


@pytest.mark.timeout(60)
def test_results_go_after_the_retention_and_an_attach_then_says_the_job_expired(make_cluster):
    """Checked by removing the scheduler core's `job_requests.expire()` from its tick: the attach keeps succeeding."""
    cluster = make_cluster(1, result_retention_seconds=2)
    with Client(address=cluster.get_address()) as client:
        job = client.map_job(square, range(3), name="short-lived")
        assert job.results(timeout=60) == [0, 1, 4]
        assert client.job("short-lived").results(timeout=60) == [0, 1, 4]

        def expired() -> str:
            try:
                client.job("short-lived")
            except ValueError as error:
                return str(error)
            return ""

        assert "expired" in wait_for(expired, "the job to expire", 30)


@pytest.mark.timeout(60)
def test_a_taken_name_and_an_unknown_name_are_clear_errors(shared_cluster):
    with Client(address=shared_cluster.get_address()) as client:
        job = client.map_job(square, range(2), name="taken")
        with pytest.raises(ValueError, match="'taken' is taken"):
            client.map_job(square, range(2), name="taken")
        with pytest.raises(ValueError, match="no job named 'never-submitted'"):
            client.job("never-submitted")
        with pytest.raises(ValueError, match="a job name"):
            client.map_job(square, range(2), name="")
        assert job.results(timeout=60) == [0, 1]


@pytest.mark.timeout(60)
def test_a_follower_cancels_a_job(shared_cluster):
    with Client(address=shared_cluster.get_address()) as submitter:
        submitter.map_job(_sleep, [30] * 4, name="to-cancel")
        with Client(address=shared_cluster.get_address()) as follower:
            job = follower.job("to-cancel")
            job.cancel()
            wait_for(lambda: job.done == 4, "every task of the job to be cancelled", 30)
            assert all(future.cancelled() for future in job.futures)


def _sleep(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


def large(value: int) -> bytes:
    return bytes([value]) * 70_000  # over the inline limit: kept in object storage under the submitter


@pytest.mark.timeout(120)
def test_with_curve_keys_a_client_of_the_same_key_follows_a_job_and_another_key_is_refused(make_cluster):
    """The owner is the key the scheduler's shell saw (PeerKeys.settled). Checked by not setting `owner_key` there:
    every job is then nobody's and the other key's attach succeeds."""
    import zmq.auth

    cluster = make_cluster(1, secure=True)
    keys = cluster.client_keys
    clients_folder = Path(keys["curve_secret_key"]).parent.parent / "authorized" / "clients"
    clients_folder.mkdir(parents=True, exist_ok=True)
    _, bob_secret = zmq.auth.create_certificates(str(clients_folder), "bob")
    with Client(cluster.get_address(), **keys) as submitter:
        submitter.map_job(large, range(3), name="alices")
    with Client(cluster.get_address(), **keys) as same_key:
        assert same_key.job("alices").results(timeout=60) == [large(n) for n in range(3)]
    bob = {"curve_secret_key": bob_secret, "curve_server_key": keys["curve_server_key"]}
    with Client(cluster.get_address(), **bob) as other_key:
        with pytest.raises(ValueError, match="belongs to another key"):
            other_key.job("alices")


@pytest.mark.timeout(60)
def test_submit_job_runs_one_call_as_a_job_another_client_reads(shared_cluster):
    with Client(address=shared_cluster.get_address()) as submitter:
        submitter.submit_job(pow, 2, 10, name="one-call")
    with Client(address=shared_cluster.get_address()) as follower:
        assert follower.job("one-call").result(timeout=60) == 1024


def payload_of(kilobytes: int) -> bytes:
    return b"x" * (kilobytes << 10)


@pytest.mark.timeout(60)
def test_results_over_the_storage_quota_are_refused_with_an_error_naming_it(launcher):
    """A scheduler with --job-result-quota-bytes 300000: a job of three 200 KiB results (each in object storage)
    keeps one; the two that would pass the quota fail with an error naming it, for the submitter and for a client
    that attaches. Checked by switching it off (no flag): all three results come back."""
    addresses, _scheduler, _storage = launcher.stack(workers=1, scheduler_args=("--job-result-quota-bytes", "300000"))
    with Client(address=addresses.scheduler) as client:
        job = client.map_job(payload_of, [200, 200, 200], name="too-big")
        concurrent.futures.wait(job.futures, timeout=60)
        errors = [future.exception() for future in job.futures if future.exception() is not None]
        assert len(errors) == 2 and sum(future.exception() is None for future in job.futures) == 1
        assert all(isinstance(error, ScalerError) and "storage quota" in str(error) for error in errors), errors
        assert "300,000 bytes" in str(errors[0])
        follower = client.job("too-big")
        concurrent.futures.wait(follower.futures, timeout=60)
        assert sum(future.exception() is not None for future in follower.futures) == 2
