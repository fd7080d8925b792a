"""What makes the fake cloud's AWS Batch jobs run: a stand-in for the Docker client moto's Batch uses.

moto's Batch runs each job (and each child of an array job) in a thread of its own that walks the job through
SUBMITTED, PENDING, RUNNABLE, STARTING and RUNNING, starts the job definition's container with `Ref::` parameters
substituted, enforces `attemptDurationSeconds`, stops it on `terminate_job`, copies its output to CloudWatch
Logs (`/aws/batch/job`) and ends the job SUCCEEDED or FAILED by the container's exit code. It asks Docker for the
container; `BatchContainers` answers instead: the job definition's image must be in the fake cloud's catalogue
(`images.py`; otherwise the job FAILS with "CannotPullContainerError: ..."), and its container runs as a local
process group started from nothing, as an ECS task's does (`sandbox.py`): the image's entrypoint runs a job of the
image's Python that adds no requirements in the image's environment (`image_environments.py`), and makes any other a
fresh environment with its `PYTHON_VERSION` and `PYTHON_REQUIREMENTS` (the job definition's `environment`); then it
runs the job definition's command. moto passes `AWS_BATCH_JOB_ID` (`<parent id>:<index>` for an array child);
`AWS_BATCH_JOB_ARRAY_INDEX` is added here, as Batch does.

`reclaim(job_id)` is the fault a spot instance's reclaim causes: the container dies with its host and the job
FAILS with "Host EC2 (instance ...) terminated.".
"""

from __future__ import annotations

import datetime
import os
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaler_rehearsal.fake_cloud.images import pull_error
from scaler_rehearsal.fake_cloud.launched import LaunchedProcess
from scaler_rehearsal.fake_cloud.runners import (
    FakeCloudRunnerSettings,
    KnownResource,
    allocate_address,
    forget_unit,
    start_unit,
)

#: The status reason AWS Batch gives a job whose spot instance was reclaimed.
RECLAIMED_REASON = "Host EC2 (instance i-0fake{suffix}) terminated."


class Container:
    """The slice of docker's Container that moto's Batch uses."""

    def __init__(
        self, process: LaunchedProcess, job_id: str, settings: FakeCloudRunnerSettings, launch: KnownResource
    ) -> None:
        self.process = process
        self.job_id = job_id
        self._settings = settings
        self._launch = launch
        self.status = "running"
        self.attrs: dict[str, Any] = {"NetworkSettings": {"Networks": {}, "IPAddress": "127.0.0.1"}}

    def reload(self) -> None:
        if self.process.exit_code() is not None:
            self.status = "exited"

    def logs(self, stdout: bool = True, stderr: bool = True, timestamps: bool = False, since: Any = None) -> bytes:
        """The command's output (stdout and stderr together, given once: for the stdout request), each line
        prefixed with a Docker-style timestamp."""
        if not stdout:
            return b""
        try:
            text = self.process.log_path.read_text(errors="replace")
        except OSError:
            return b""
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines = [f"{stamp} {line}" if timestamps else line for line in text.splitlines() if line.strip()]
        return ("\n".join(lines) + "\n").encode() if lines else b""

    def wait(self) -> dict[str, int]:
        while (code := self.process.exit_code()) is None:  # not reaped here: `kill` reaps, after its group
            time.sleep(0.05)
        return {"StatusCode": code if code >= 0 else 128 - code}

    def kill(self) -> None:
        self.process.kill()
        self.status = "exited"

    def remove(self) -> None:
        self.process.kill()
        forget_unit(self._settings, self._launch)


class _Containers:
    def __init__(self, owner: BatchContainers) -> None:
        self._owner = owner

    def run(self, image: str, command: Any, environment: dict[str, str] | None = None, name: str = "",
            **_ignored: Any) -> Container:  # fmt: skip
        return self._owner.start(image, command, environment or {}, name)


class BatchContainers:
    """The Docker client moto's Batch jobs get (`docker_client`): containers are local process groups."""

    def __init__(self, settings: FakeCloudRunnerSettings) -> None:
        self.settings = settings
        self.containers = _Containers(self)
        self._running: dict[str, Container] = {}  #: by job id
        self._lock = threading.Lock()

    def start(self, image_name: str, command: Any, environment: dict[str, str], name: str) -> Container:
        region = environment.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
        job_id = environment.get("AWS_BATCH_JOB_ID", name)
        image = self.settings.images.find(image_name)
        if image is None:
            reason = pull_error(image_name)
            _set_status_reason(job_id, reason)
            raise RuntimeError(reason)  # moto's job thread fails the job
        variables = {key: value for key, value in environment.items() if not key.startswith("MOTO_")}
        _parent, separator, index = job_id.partition(":")
        if separator:
            variables["AWS_BATCH_JOB_ARRAY_INDEX"] = index
        argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
        launch = KnownResource(time.monotonic(), name=f"batch-{job_id.replace(':', '-')}")
        allocate_address(self.settings, launch)
        unit = self.settings.sandbox.container(launch.name, image, argv, variables, self.settings.endpoint_url, region)
        log = self.settings.log_directory / "batch" / f"{job_id.replace(':', '-')}.log"
        _note_command(log, argv)
        container = Container(start_unit(self.settings, launch, unit, log), job_id, self.settings, launch)
        with self._lock:
            self._running[job_id] = container
        return container

    def reclaim(self, job_id: str) -> bool:
        """The host of a running job disappears (spot reclaim): its container dies and the job fails with the
        reason Batch gives. False when the job has no running container."""
        from moto.batch.models import batch_backends

        with self._lock:
            container = self._running.get(job_id)
        if container is None or container.process.exit_code() is not None:
            return False
        for _account, regions in list(batch_backends.items()):
            for backend in list(regions.values()):
                job = backend._jobs.get(job_id)
                if job is not None:
                    job.job_stopped_reason = RECLAIMED_REASON.format(suffix=job_id[:8])
        container.kill()
        return True

    def close(self, join_seconds: float = 0.0) -> None:
        """Kill every running container; with `join_seconds`, also stop moto's unfinished job threads and wait for
        them (all together, at most that long): moto's own reset joins them one by one, 0.2 s each, which for a
        few hundred array children outlasts any request timeout."""
        from moto.batch.models import batch_backends

        jobs = []
        if join_seconds > 0:
            for _account, regions in list(batch_backends.items()):
                for backend in list(regions.values()):
                    for job in list(backend._jobs.values()):
                        if job.is_alive():
                            job.stop = True
                            jobs.append(job)
        with self._lock:
            containers, self._running = list(self._running.values()), {}
        for container in containers:
            container.remove()
        deadline = time.monotonic() + join_seconds
        for job in jobs:
            job.join(max(0.0, deadline - time.monotonic()))


def _set_status_reason(job_id: str, reason: str) -> None:
    from moto.batch.models import batch_backends

    for _account, regions in list(batch_backends.items()):
        for backend in list(regions.values()):
            job = backend._jobs.get(job_id)
            if job is not None:
                job.job_stopped_reason = reason


def _note_command(log: Path, argv: list[str]) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as file:
        file.write(f"# fake cloud: {shlex.join(argv)}\n")


def settle_array_parents() -> None:
    """An array job ends when its children have: SUCCEEDED if they all did, else FAILED (as AWS Batch reports
    it; moto leaves such a parent SUBMITTED unless every child succeeded and it is described)."""
    from moto.batch.models import batch_backends

    for _account, regions in list(batch_backends.items()):
        for backend in list(regions.values()):
            for job in list(backend._jobs.values()):
                children = job._child_jobs
                if not children or job.job_stopped or not all(child.job_stopped for child in children):
                    continue
                job.job_stopped = True
                job.status = "SUCCEEDED" if all(child.status == "SUCCEEDED" for child in children) else "FAILED"


def install(containers: BatchContainers) -> Callable[[], None]:
    """Make moto's Batch jobs use `containers`; returns the undo."""
    from moto import settings
    from moto.batch.models import Job

    Job.docker_client = property(lambda _job: containers)  # type: ignore[assignment,method-assign]
    # moto asks Docker (a curl to its socket) where its server is, for the containers; ours talk to the endpoint.
    original_host = settings.moto_server_host
    settings.moto_server_host = lambda: "http://127.0.0.1"  # type: ignore[assignment]

    def uninstall() -> None:
        del Job.docker_client  # back to DockerModel's
        settings.moto_server_host = original_host

    return uninstall
