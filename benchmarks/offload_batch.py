"""AWS Batch offloading on the fake cloud: array jobs against one job per task, and the cost per task against
local workers.

    python benchmarks/offload_batch.py [--tasks 1000] [--in-flight 100] [--e2e-tasks 200]

1. The Batch data path alone (`BatchBackend`, as a proxy drives it): TASKS tiny tasks, IN_FLIGHT at a time (a
   proxy's --max-concurrent-jobs), submitted as one array job per burst or as one job per task; prints the AWS
   calls made (Batch and S3) and the wall time. Every job is a real local process (moto's Batch through the fake
   cloud's Docker stand-in), so the wall time is mostly those processes starting on this machine.
2. End to end: a scheduler, object storage and an `aws_hpc` manager (IN_FLIGHT jobs per proxy) on the fake cloud
   against a native manager with one worker per core; a client maps E2E_TASKS tiny tasks; prints the time per
   task.

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cloudpickle

from scaler import Client
from scaler.config.sections import AWSHPCWorkerManagerConfig
from scaler.fake_cloud.cloud import FakeCloud
from scaler.io.address import free_tcp_port_block
from scaler.payload.remote_bundle import pack_task
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, ObjectID, TaskID
from scaler.worker_manager.aws.client import AwsClients
from scaler.worker_manager.aws_hpc.batch_backend import BatchBackend
from scaler.worker_manager.aws_hpc.provision import provision
from scaler.worker_manager.offload.backend import RemoteJob

BIN = Path(sys.executable).parent
FUNCTION_ID = ObjectID(b"f" * 16)


def square(x: int) -> int:
    return x * x


class Objects:
    def __init__(self) -> None:
        self.objects = {FUNCTION_ID: cloudpickle.dumps(square)}

    def get(self, object_id: bytes) -> bytes:
        return self.objects[object_id]


def bundles(count: int) -> list[RemoteJob]:
    storage = Objects()
    jobs = []
    for number in range(count):
        body = codec.encode_body(
            m.TaskBody(FUNCTION_ID, (m.Argument(m.ArgumentKind.INLINE, cloudpickle.dumps(number)),))
        )
        task = m.Task(TaskID(number.to_bytes(16, "big")), ClientID(b"Client|bench"), body)
        jobs.append(RemoteJob(f"BAT-bench-{number}", pack_task(task, storage)))  # type: ignore[arg-type]
    return jobs


def data_path(
    settings: AWSHPCWorkerManagerConfig, jobs: list[RemoteJob], in_flight: int, array: bool
) -> tuple[float, dict[str, int]]:
    backend = BatchBackend(settings, AwsClients(settings.aws_region))
    started = time.monotonic()
    for start in range(0, len(jobs), in_flight):
        burst = jobs[start : start + in_flight]
        if array:
            backend.submit(burst)
        else:
            for job in burst:
                backend.submit([job])
        done = 0
        while done < len(burst):
            time.sleep(backend.poll_interval_seconds)
            outcomes = backend.poll()
            assert all(outcome.outcome is not None for outcome in outcomes), [o.failure for o in outcomes]
            done += len(outcomes)
    return time.monotonic() - started, backend.api_calls


def end_to_end(kind: str, tasks: int, slots: int, endpoint: str) -> float:
    base = free_tcp_port_block(3)
    scheduler, storage = f"tcp://127.0.0.1:{base}", f"tcp://127.0.0.1:{base + 1}"
    quiet = ["-ll", "WARNING"]
    environment = dict(
        os.environ, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing"
    )
    flags = {
        "aws_hpc": ["-q", "bench-queue", "-d", "bench-job", "--s3-bucket", "bench-tasks", "-mcj", str(slots)],
        "baremetal_native": ["-mtc", str(os.cpu_count() or 2)],  # local workers: one per core
    }[kind]
    started = [
        subprocess.Popen([BIN / "scaler_object_storage_server", storage, *quiet]),
        subprocess.Popen([BIN / "scaler_scheduler", scheduler, "-osa", storage, *quiet]),
        subprocess.Popen(
            [BIN / "scaler_worker_manager", kind, scheduler, "-wmi", f"bench-{kind}", *flags, *quiet], env=environment
        ),
    ]
    try:
        with Client(address=scheduler, timeout_seconds=300) as client:
            client.map(square, range(8))  # the workers (the proxy) are up
            began = time.monotonic()
            results = client.map(square, range(tasks))
            assert results == [x * x for x in range(tasks)]
            return time.monotonic() - began
    finally:
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--e2e-tasks", type=int, default=200)
    arguments = parser.parse_args()
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    with FakeCloud(log_directory=Path(tempfile.mkdtemp())) as cloud:
        os.environ["AWS_ENDPOINT_URL"] = cloud.endpoint_url
        settings = AWSHPCWorkerManagerConfig(
            scheduler_address="tcp://127.0.0.1:1", job_queue="bench-queue", job_definition="bench-job",
            s3_bucket="bench-tasks",
        )  # fmt: skip
        provision(settings, "bench:latest")
        jobs = bundles(arguments.tasks)
        print(f"{arguments.tasks} tiny tasks through AWS Batch on the fake cloud, {arguments.in_flight} in flight")
        print(f"{'submission':<22} {'wall s':>7} {'Batch calls':>12} {'S3 calls':>9} {'calls/task':>11}")
        for array in (True, False):
            wall, calls = data_path(settings, jobs, arguments.in_flight, array)
            label = "array job per burst" if array else "one job per task"
            batch, s3 = calls.get("batch", 0), calls.get("s3", 0)
            per_task = (batch + s3) / arguments.tasks
            print(f"{label:<22} {wall:7.1f} {batch:12d} {s3:9d} {per_task:11.2f}", flush=True)
        print(f"\nend to end, {arguments.e2e_tasks} tiny tasks, {arguments.in_flight} slots")
        times = {kind: end_to_end(kind, arguments.e2e_tasks, arguments.in_flight, cloud.endpoint_url)
                 for kind in ("aws_hpc", "baremetal_native")}  # fmt: skip
        for kind, wall in times.items():
            print(f"{kind:<18} {wall:7.1f} s  {1000 * wall / arguments.e2e_tasks:8.1f} ms per task", flush=True)
        print(f"aws_hpc / native: {times['aws_hpc'] / times['baremetal_native']:.0f}x")


if __name__ == "__main__":
    main()
