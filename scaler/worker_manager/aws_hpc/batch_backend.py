"""AWS Batch as an offloading backend: each task a Batch job, tasks submitted together one array job.

- submit: one task is one `submit_job` whose bundle travels inline in the job's `payload` parameter when small
  (gzipped, base64) and through S3 (`<prefix>/inputs/<key>.bin`) when not; two or more tasks are one array job
  (at most 10,000 children) whose bundles are in S3 at `<prefix>/array/<name>/<index>.bin`, fewer API calls for
  a burst. A job is named after its task's key, so the jobs of a proxy are found by name.
- poll: `describe_jobs` by 100; a job that ended has left its outcome at `<prefix>/results/<job id>.bin` (the job
  runner writes it, also for a task that raised); the outcome and the task's inputs are then deleted. A job that
  ended without an outcome is reported with its status reason and the end of its CloudWatch log; a job whose host
  was terminated (spot reclaim) is reported as a lost host, which the scheduler retries.
- cancel: `terminate_job` and the task's input deleted.
- lease: each job carries its proxy's lease (`job_lease`: an object `<prefix>/leases/<proxy>` the proxy renews
  while it has jobs, removed when it stops or, once it died, with its orphans); a job whose lease ran out (the
  laptop gone) does not run its task, or stops it.

The job definition runs `python3 -m scaler.worker_manager.aws_hpc.job_runner` with the parameters named in
`job_runner.JOB_PARAMETERS` (`provision.py` registers such a definition; docs/worker_managers.md shows the image).
"""

from __future__ import annotations

import base64
import gzip
import logging
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from scaler.config.sections import AWSHPCWorkerManagerConfig, WorkerManagerSettings
from scaler.worker_manager.aws.client import AwsClients, CloudError, plain_error
from scaler.worker_manager.aws_hpc.job_lease import LeaseKeeper
from scaler.worker_manager.aws_hpc.job_runner import NONE
from scaler.worker_manager.offload.backend import JobOutcome, OffloadError, RemoteJob
from scaler.worker_manager.ship.unit_target import python_version_problem

logger = logging.getLogger(__name__)

#: Bundles up to this size (gzipped, base64) travel in the job's parameters (Batch allows 30 KiB per request).
INLINE_LIMIT_BYTES = 20 * 1024
#: Children of one array job at most (AWS Batch's limit).
MAX_ARRAY_SIZE = 10_000
#: Jobs per describe_jobs call (AWS Batch's limit).
DESCRIBE_LIMIT = 100
#: A finished job whose outcome is not (yet) in S3 is looked at this many polls before it is reported lost.
MISSING_OUTCOME_POLLS = 5
#: Lines of a failed job's log quoted in its error.
LOG_TAIL_LINES = 20
#: Status reasons with which AWS Batch says a job's host went away (spot reclaim, instance failure).
HOST_LOST_REASONS = ("Host EC2", "host EC2")
ACTIVE_STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")


@dataclass(slots=True)
class _InFlight:
    key: str
    job_id: str
    input_key: str | None  #: the S3 object of its bundle, if it travelled through S3
    missing_outcome_polls: int = 0


def make_backend(settings: WorkerManagerSettings) -> BatchBackend:
    assert isinstance(settings, AWSHPCWorkerManagerConfig)
    try:
        clients = AwsClients(settings.aws_region, endpoint_url=settings.aws_endpoint_url)
    except CloudError as error:
        raise OffloadError(str(error)) from None
    backend = BatchBackend(settings, clients)
    backend.check()
    return backend


class BatchBackend:
    name = "AWS Batch"
    batch_window_seconds = 0.25
    poll_interval_seconds = 1.0

    def __init__(self, settings: AWSHPCWorkerManagerConfig, clients: AwsClients) -> None:
        self._settings = settings
        self._batch, self._s3, self._logs = clients["batch"], clients["s3"], clients["logs"]
        self._prefix = settings.s3_prefix.strip("/")
        #: the lease of this proxy's jobs, named after their keys' prefix (the proxy's) at the first submit
        self._lease: LeaseKeeper | None = None
        self._lease_key: str | None = None
        self._lock = threading.Lock()
        self._jobs: dict[str, _InFlight] = {}  #: by job id
        self._keys: dict[str, str] = {}  #: task key -> job id
        #: AWS calls made, by service ("batch", "s3", "logs"): Batch's are the rate-limited ones
        self.api_calls: dict[str, int] = {}

    # ------------------------------------------------------------ checks

    def check(self) -> None:
        """The queue, the job definition and the bucket exist; OffloadError naming the one that does not."""
        settings = self._settings
        queues = self._api(self._batch.describe_job_queues, jobQueues=[settings.job_queue])["jobQueues"]
        if not queues:
            raise OffloadError(
                f"AWS Batch job queue {settings.job_queue!r} does not exist (--job-queue): create it, e.g. with "
                f"python -m scaler.worker_manager.aws_hpc.provision (`scaler --docs worker_managers`, 11.1)"
            )
        definition = settings.job_definition.split(":")[0]
        found = self._api(self._batch.describe_job_definitions, jobDefinitionName=definition, status="ACTIVE")
        if not found["jobDefinitions"]:
            raise OffloadError(
                f"AWS Batch job definition {settings.job_definition!r} does not exist or is inactive "
                f"(--job-definition): register it, e.g. with python -m scaler.worker_manager.aws_hpc.provision"
            )
        problem = _definition_python_problem(found["jobDefinitions"][0], settings.job_definition)
        if problem is not None:
            raise OffloadError(problem)
        try:
            self._api(self._s3.head_bucket, Bucket=settings.s3_bucket)
        except OffloadError as error:
            raise OffloadError(f"S3 bucket {settings.s3_bucket!r} (--s3-bucket) is not usable: {error}") from None

    # ------------------------------------------------------------ OffloadBackend

    def submit(self, jobs: list[RemoteJob]) -> None:
        self._lease_of(jobs[0].key).renew(force=True)
        for start in range(0, len(jobs), MAX_ARRAY_SIZE):
            chunk = jobs[start : start + MAX_ARRAY_SIZE]
            if len(chunk) == 1:
                self._submit_one(chunk[0])
            else:
                self._submit_array(chunk)

    def poll(self) -> list[JobOutcome]:
        with self._lock:
            job_ids = list(self._jobs)
        if job_ids and self._lease is not None:
            self._lease.renew()
        outcomes: list[JobOutcome] = []
        spent: list[str | None] = []  #: the S3 objects of the jobs that ended, deleted together
        for start in range(0, len(job_ids), DESCRIBE_LIMIT):
            described = self._api(self._batch.describe_jobs, jobs=job_ids[start : start + DESCRIBE_LIMIT])["jobs"]
            for job in described:
                if job["status"] in ("SUCCEEDED", "FAILED"):
                    outcome = self._ended(job, spent)
                    if outcome is not None:
                        outcomes.append(outcome)
        self._delete(*spent)
        return outcomes

    def cancel(self, key: str, reason: str) -> None:
        with self._lock:
            job_id = self._keys.pop(key, None)
            job = self._jobs.pop(job_id, None) if job_id is not None else None
        if job is None:
            return
        self._api(self._batch.terminate_job, jobId=job.job_id, reason=f"Canceled by Scaler: {reason}"[:1024])
        self._delete(job.input_key, self._result_key(job.job_id))

    def close(self) -> None:
        with self._lock:
            keys = list(self._keys)
        for key in keys:
            try:
                self.cancel(key, "its proxy worker stopped")
            except OffloadError as error:
                logger.warning("could not cancel job %s: %s", key, error)
        self._delete(self._lease_key)  # its jobs are cancelled: one that still starts finds no lease and ends

    def cancel_orphans(self, key_prefix: str) -> int:
        cancelled = 0
        for job in self._listed_jobs():
            if not job["jobName"].startswith(f"scaler-{key_prefix}-"):
                continue
            ids = [job["jobId"]]
            size = job.get("arrayProperties", {}).get("size")
            if size:
                ids += [f"{job['jobId']}:{index}" for index in range(size)]
            for job_id in ids:
                self._api(self._batch.terminate_job, jobId=job_id, reason="Canceled by Scaler: its proxy worker died")
            cancelled += 1
        self._delete(self._lease_key_of(key_prefix))
        return cancelled

    # ------------------------------------------------------------ the lease

    def _lease_of(self, job_key: str) -> LeaseKeeper:
        if self._lease is None:
            key = self._lease_key = self._lease_key_of(job_key.rsplit("-", 1)[0])
            where = f"{self._settings.s3_bucket}/{key}"
            self._lease = LeaseKeeper(where, self._settings.lease_seconds, lambda: self._write_lease(key))
        return self._lease

    def _write_lease(self, key: str) -> None:
        try:
            self._api(self._s3.put_object, Bucket=self._settings.s3_bucket, Key=key, Body=b"")
        except OffloadError as error:
            where = f"s3://{self._settings.s3_bucket}/{key}"
            raise OffloadError(f"could not renew the jobs' lease {where} (lease_seconds): {error}") from None

    def _lease_key_of(self, key_prefix: str) -> str:
        return f"{self._prefix}/leases/{key_prefix}"

    # ------------------------------------------------------------ submitting

    def _submit_one(self, job: RemoteJob) -> None:
        packed = gzip.compress(job.bundle, compresslevel=1)
        inline = base64.b64encode(packed).decode()
        input_key = None
        parameters = {"payload": inline, "s3_key": NONE}
        if len(inline) > INLINE_LIMIT_BYTES:
            input_key = f"{self._prefix}/inputs/{job.key}.bin"
            self._put(input_key, packed)
            parameters = {"payload": NONE, "s3_key": input_key}
        answer = self._submit(f"scaler-{job.key}", parameters)
        self._track(job.key, answer["jobId"], input_key)

    def _submit_array(self, jobs: list[RemoteJob]) -> None:
        name = f"scaler-{jobs[0].key}-x{len(jobs)}"
        folder = f"{self._prefix}/array/{uuid.uuid4().hex}"
        for index, job in enumerate(jobs):
            self._put(f"{folder}/{index}.bin", gzip.compress(job.bundle, compresslevel=1))
        answer = self._submit(name, {"payload": NONE, "s3_key": f"{folder}/ARRAY_INDEX.bin"}, size=len(jobs))
        for index, job in enumerate(jobs):
            self._track(job.key, f"{answer['jobId']}:{index}", f"{folder}/{index}.bin")

    def _submit(self, name: str, parameters: dict[str, str], size: int = 0) -> Any:
        settings = self._settings
        request: dict[str, Any] = dict(
            jobName=name[:128], jobQueue=settings.job_queue, jobDefinition=settings.job_definition,
            parameters={"s3_bucket": settings.s3_bucket, "result_prefix": f"{self._prefix}/results", **parameters},
            timeout={"attemptDurationSeconds": max(60, settings.job_timeout_minutes * 60)},
            containerOverrides={"environment": self._lease.variables() if self._lease is not None else []},
        )  # fmt: skip
        if size:
            request["arrayProperties"] = {"size": size}
        return self._api(self._batch.submit_job, **request)

    def _track(self, key: str, job_id: str, input_key: str | None) -> None:
        with self._lock:
            self._jobs[job_id] = _InFlight(key, job_id, input_key)
            self._keys[key] = job_id

    # ------------------------------------------------------------ outcomes

    def _ended(self, described: dict[str, Any], spent: list[str | None]) -> JobOutcome | None:
        with self._lock:
            job = self._jobs.get(described["jobId"])
        if job is None:
            return None  # cancelled meanwhile
        result_key = self._result_key(job.job_id)
        outcome = self._get(result_key)
        reason = described.get("statusReason") or ""
        if outcome is None and described["status"] == "SUCCEEDED":
            job.missing_outcome_polls += 1
            if job.missing_outcome_polls < MISSING_OUTCOME_POLLS:
                return None  # S3 may show it at the next poll
            reason = f"it succeeded but left no result at s3://{self._settings.s3_bucket}/{result_key}"
        with self._lock:
            self._jobs.pop(job.job_id, None)
            self._keys.pop(job.key, None)
        spent += [job.input_key, result_key]
        if outcome is not None:
            return JobOutcome(job.key, gzip.decompress(outcome))
        failure = f"AWS Batch job {job.job_id} {described['status']}: {reason or 'no reason given'}"
        tail = self._log_tail(described)
        if tail:
            failure += f"\n--- end of its log ---\n{tail}"
        return JobOutcome(job.key, None, failure, host_lost=reason.startswith(HOST_LOST_REASONS))

    def _log_tail(self, described: dict[str, Any]) -> str:
        stream = described.get("container", {}).get("logStreamName")
        if not stream:
            return ""
        try:
            events = self._api(
                self._logs.get_log_events, logGroupName="/aws/batch/job", logStreamName=stream,
                limit=LOG_TAIL_LINES, startFromHead=False,
            )["events"]  # fmt: skip
        except OffloadError:
            return ""
        return "\n".join(event["message"] for event in events)

    def _result_key(self, job_id: str) -> str:
        return f"{self._prefix}/results/{job_id}.bin"

    # ------------------------------------------------------------ S3 and errors

    def _put(self, key: str, data: bytes) -> None:
        try:
            self._api(self._s3.put_object, Bucket=self._settings.s3_bucket, Key=key, Body=data)
        except OffloadError as error:
            where = f"s3://{self._settings.s3_bucket}/{key}"
            raise OffloadError(f"could not write the task's payload to {where}: {error}") from None

    def _get(self, key: str) -> bytes | None:
        try:
            answer = self._api(self._s3.get_object, Bucket=self._settings.s3_bucket, Key=key)
        except OffloadError as error:
            if "NoSuchKey" in str(error) or "Not Found" in str(error):
                return None
            raise
        body: bytes = answer["Body"].read()
        return body

    def _delete(self, *keys: str | None) -> None:
        """Delete these objects, up to 1,000 per call; a failure is logged (the bucket's lifecycle rule removes
        what is left)."""
        names = [key for key in keys if key is not None]
        for start in range(0, len(names), 1000):
            chunk = [{"Key": key} for key in names[start : start + 1000]]
            try:
                answer = self._api(
                    self._s3.delete_objects, Bucket=self._settings.s3_bucket, Delete={"Objects": chunk, "Quiet": True}
                )
            except OffloadError as error:
                logger.warning(
                    "could not delete %d task object(s) in s3://%s: %s", len(chunk), self._settings.s3_bucket, error
                )
                continue
            for failed in answer.get("Errors", []):
                logger.warning(
                    "could not delete s3://%s/%s: %s",
                    self._settings.s3_bucket,
                    failed.get("Key"),
                    failed.get("Message"),
                )

    def _listed_jobs(self) -> list[dict[str, Any]]:
        jobs = []
        for status in ACTIVE_STATUSES:
            paginator = self._batch.get_paginator("list_jobs")
            try:
                for page in paginator.paginate(jobQueue=self._settings.job_queue, jobStatus=status):
                    self._count(self._batch)
                    jobs.extend(page["jobSummaryList"])
            except Exception as error:
                raise OffloadError(str(plain_error(error))) from None
        return jobs

    def _count(self, client: Any) -> None:
        service = client.meta.service_model.service_name
        self.api_calls[service] = self.api_calls.get(service, 0) + 1

    def _api(self, function: Any, **kwargs: Any) -> Any:
        self._count(function.__self__)
        try:
            return function(**kwargs)
        except Exception as error:
            plain = plain_error(error)
            if isinstance(plain, CloudError):
                raise OffloadError(str(plain)) from None
            raise


def _definition_python_problem(definition: dict[str, Any], name: str) -> str | None:
    """Why the job definition's image would run another Python than the client's (its `PYTHON_VERSION`, the worker
    image's contract: docs/worker_managers.md), or None (not set: the image's own, which the user vouches for)."""
    environment = definition.get("containerProperties", {}).get("environment", [])
    version = next((item.get("value") for item in environment if item.get("name") == "PYTHON_VERSION"), None)
    problem = python_version_problem(f"the PYTHON_VERSION of job definition {name!r}", version)
    return None if problem is None else f"{problem} (register the job definition again with it)"
