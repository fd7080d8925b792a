"""Time from the first task to the first result of a burst from zero on the fake cloud: boot, install, connect.

    python benchmarks/burst_first_result.py [--boot-seconds 5] [--requirements tomli-w] [--kind ecs|ec2]
                                            [--isolate-network]

A stack like config/aws_ecs.toml (the scheduler in a hub unit, no inbound port, the stack's own keys) with
`environment = "requirements"` and one package to install, on a fake cloud in this process whose units start from
nothing (the image's or the AMI's Python, a fresh environment, the package index through the cloud's mirror;
`--isolate-network`, root only: in network namespaces that cannot reach this machine). Two runs, each with a new
stack and the hub up before the clock starts:

- cold: a new bucket (the wheel of this build packed and uploaded), an empty package cache for the units (the fake
  cloud's `--cache-dir`, a new folder: every package comes from the index);
- warm: the same bucket (the wheel is there) and the cache the cold run filled.

For each: the seconds from `submit` to the first result, and what the unit's boot report says (boot: launch
request to the boot program; install: what the manager shipped). `--boot-seconds` stands for the image pull and the
machine's start; the install runs for real. Not a test: nothing here asserts a time.
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
from scaler.security.connection_files import discovered_connection

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


def first_result(folder: pathlib.Path, kind: str, bucket: str, requirements: str) -> dict[str, Any]:
    port = free_tcp_port_block(3)
    lines = (ECS_LINES if kind == "ecs" else EC2_LINES).format(requirements=requirements)
    manager_type = "aws_raw_ecs" if kind == "ecs" else "orb_aws_ec2"
    path = folder / f"stack-{port}.toml"
    path.write_text(STACK.format(port=port, type=manager_type, bucket=bucket, manager_lines=lines))
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
    parser.add_argument("--isolate-network", action="store_true", help="units in network namespaces (root only)")
    arguments = parser.parse_args()
    folder = pathlib.Path(tempfile.mkdtemp(prefix="burst-first-result-"))
    os.environ["XDG_CONFIG_HOME"] = str(folder / "config")
    os.environ["XDG_CACHE_HOME"] = str(folder / "cache")  # no wheel of this build packed yet
    cloud = FakeCloud(boot_seconds=arguments.boot_seconds, log_directory=folder / "cloud",
                      cache_directory=folder / "units-cache", isolate_network=arguments.isolate_network)  # fmt: skip
    with cloud:
        os.environ.update(AWS_ENDPOINT_URL=cloud.endpoint_url, AWS_ACCESS_KEY_ID="testing",
                          AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")  # fmt: skip
        bucket = "scaler-bench-first-result"
        rows = {"cold": first_result(folder, arguments.kind, bucket, arguments.requirements)}
        rows["warm"] = first_result(folder, arguments.kind, bucket, arguments.requirements)
    isolation = ", isolated network" if arguments.isolate_network else ""
    print(f"{arguments.kind}, fake cloud boot {arguments.boot_seconds:g} s{isolation}, installing "
          f"{arguments.requirements}:")  # fmt: skip
    for name, row in rows.items():
        print(f"  {name}: {json.dumps(row)}")


if __name__ == "__main__":
    main()
