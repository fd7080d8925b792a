"""Time from the first task to the first result of a burst from zero on the fake cloud: boot, install, connect.

    python benchmarks/burst_first_result.py [--boot-seconds 5] [--requirements tomli-w] [--kind ecs|ec2]

A stack like config/aws_ecs.toml (the scheduler in a hub unit, no inbound port, the stack's own keys) with
`environment = "requirements"` and one package to install, on a fake cloud in this process. Three runs, each
with a new stack and the hub up before the clock starts:

- cold: a new bucket (the wheel of this build uploaded), no pip cache on the units (`PIP_NO_CACHE_DIR`);
- warm-up (not reported), then warm: the wheel already in the bucket, the units' pip cache filled.

For each: the seconds from `submit` to the first result, and what the unit's boot report says (boot: launch
request to the boot program; install: what the manager shipped). The fake cloud's units are processes of this
machine: `--boot-seconds` stands for the image pull and the machine's start, and the install runs for real
against the package index. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import boto3

from scaler import Client
from scaler.fake_cloud.cloud import FakeCloud
from scaler.io.address import free_tcp_port_block
from scaler.io.stack_keys import discovered_connection

BIN = pathlib.Path(sys.executable).parent
STACK = """
[scaler]
hub = "cloud"

[scheduler]
bind_address = "tcp://127.0.0.1:{port}"
policy_content = "allocate=even_load; scaling=work; work_tasks_per_worker=1; cooldown_seconds=60"

[[worker_manager]]
type = "{type}"
scheduler_address = "tcp://127.0.0.1:{port}"
worker_manager_id = "bench"
max_task_concurrency = 2
aws_region = "us-east-1"
s3_bucket = "{bucket}"
environment = "requirements"
{manager_lines}
"""
ECS_LINES = 'ecs_subnets = "default"\necs_task_cpu = 2\necs_task_memory = 4\necs_python_requirements = "{requirements}"'
EC2_LINES = 'instance_type = "t3.medium"\nrequirements_txt = "{requirements}"'


def first_result(folder: pathlib.Path, kind: str, bucket: str, requirements: str, cold: bool) -> dict[str, Any]:
    port = free_tcp_port_block(3)
    lines = (ECS_LINES if kind == "ecs" else EC2_LINES).format(requirements=requirements)
    manager_type = "aws_raw_ecs" if kind == "ecs" else "orb_aws_ec2"
    path = folder / f"stack-{port}.toml"
    path.write_text(STACK.format(port=port, type=manager_type, bucket=bucket, manager_lines=lines))
    if cold:
        os.environ["PIP_NO_CACHE_DIR"] = "1"  # the units (local processes of the fake cloud) inherit it
    else:
        os.environ.pop("PIP_NO_CACHE_DIR", None)
    address = f"tcp://127.0.0.1:{port}"
    with open(folder / f"stack-{port}.log", "wb") as log:
        stack = subprocess.Popen([str(BIN / "scaler"), str(path)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while discovered_connection(address) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # the manager registers right after the hub
        with Client(address, timeout_seconds=300) as client:
            started = time.monotonic()
            client.submit(abs, -1).result()
            seconds = time.monotonic() - started
        return {"first_result_seconds": round(seconds, 2), **_report(bucket)}
    finally:
        stack.send_signal(signal.SIGTERM)
        stack.wait(120)


def _report(bucket: str) -> dict[str, Any]:
    s3 = boto3.client("s3", region_name="us-east-1")
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket, Prefix="units/bench/").get("Contents", [])]
    newest = sorted((s3.head_object(Bucket=bucket, Key=key)["LastModified"], key) for key in keys
                    if key.endswith("report.json"))  # fmt: skip
    if not newest:
        return {}
    report = json.loads(s3.get_object(Bucket=bucket, Key=newest[-1][1])["Body"].read())
    return {"boot_seconds": report.get("boot_seconds"), "install_seconds": report.get("install_seconds")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boot-seconds", type=float, default=5.0)
    parser.add_argument("--requirements", default="tomli-w")
    parser.add_argument("--kind", choices=("ecs", "ec2"), default="ecs")
    arguments = parser.parse_args()
    folder = pathlib.Path(tempfile.mkdtemp(prefix="burst-first-result-"))
    os.environ["XDG_CONFIG_HOME"] = str(folder / "config")
    os.environ["XDG_CACHE_HOME"] = str(folder / "cache")  # no wheel of this build packed yet
    with FakeCloud(boot_seconds=arguments.boot_seconds, log_directory=folder / "cloud") as cloud:
        os.environ.update(AWS_ENDPOINT_URL=cloud.endpoint_url, AWS_ACCESS_KEY_ID="testing",
                          AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")  # fmt: skip
        bucket = "scaler-bench-first-result"
        rows = {"cold": first_result(folder, arguments.kind, bucket, arguments.requirements, cold=True)}
        first_result(folder, arguments.kind, bucket, arguments.requirements, cold=False)  # fills the pip cache
        rows["warm"] = first_result(folder, arguments.kind, bucket, arguments.requirements, cold=False)
    print(f"{arguments.kind}, fake cloud boot {arguments.boot_seconds:g} s, installing {arguments.requirements}:")
    for name, row in rows.items():
        print(f"  {name}: {json.dumps(row)}")


if __name__ == "__main__":
    main()
