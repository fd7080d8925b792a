"""#38 finding 3 (goal 3): the AWS Batch rehearsal of docs/worker_managers.md (10.1) runs as written, commands only:
`scaler_fake_cloud` (no --image: its own `scaler-batch-job` image has this build baked in), `provision`, `scaler
aws_batch.toml` (the example file, on ports of its own), then a client in the working folder maps `pow` and a function
of a module of that folder (`analysis38.py`, not installed), which travels with each task. And a worker that cannot
import a working-folder module says what to do.

Checked by switching the mechanisms off: with the catalogue's `scaler-batch-job` image baking nothing (as before),
every job dies with "No module named 'scaler'" and the first test fails; with the launcher no longer setting
`ship_local_modules`, the module's map fails with "No module named 'analysis38'"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scaler.config.example_files import example_text
from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import (
    CLOUD_START_SECONDS,
    COLD_START_SECONDS,
    Launcher,
    free_addresses,
    probe_scheduler,
)

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(480)]

MODULE = "def score(x):\n    return x * x + 1\n"
CLIENT = """
import sys

import analysis38
from scaler import Client

with Client(address=sys.argv[1], timeout_seconds=120) as client:
    print(client.map(pow, [2, 3], [2, 2]))
    print(client.map(analysis38.score, range(5)))
"""


def test_the_documented_batch_rehearsal_runs_a_working_folder_function(launcher: Launcher, tmp_path: Path) -> None:
    port = free_tcp_port_block(1)
    cloud = launcher.start("scaler_fake_cloud", "--port", str(port))
    cloud.wait_for_log("AWS_ENDPOINT_URL=", CLOUD_START_SECONDS)
    environment = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
                   "AWS_SECRET_ACCESS_KEY": "testing"}  # fmt: skip
    addresses = free_addresses()
    text = example_text("aws_batch").replace("tcp://127.0.0.1:8516", addresses.scheduler)
    (tmp_path / "aws_batch.toml").write_text(text.replace("tcp://127.0.0.1:8517", addresses.object_storage))
    provisioned = subprocess.run(
        [sys.executable, "-m", "scaler.worker_manager.aws_hpc.provision", "aws_batch.toml"], cwd=tmp_path,
        env={**os.environ, **environment}, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert provisioned.returncode == 0, provisioned.stderr
    assert "job definition scaler-batch-job: registered (image scaler-batch-job:latest)" in provisioned.stdout
    stack = launcher.start("scaler", str(tmp_path / "aws_batch.toml"), env=environment)
    probe_scheduler(addresses.scheduler, COLD_START_SECONDS, stack.popen)
    stack.wait_for_log("worker manager 'batch' (aws_hpc)")
    (tmp_path / "analysis38.py").write_text(MODULE)
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, addresses.scheduler], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:] + stack.log_text()[-4000:]
    assert done.stdout.splitlines() == ["[4, 9]", "[1, 2, 5, 10, 17]"]


def test_a_worker_without_the_module_says_what_to_do(launcher: Launcher, tmp_path: Path) -> None:
    addresses, _scheduler, _storage = launcher.stack(workers=1)  # a plain scheduler: modules go by reference
    (tmp_path / "analysis38.py").write_text(MODULE)
    code = "import sys, analysis38\nfrom scaler import Client\nwith Client(address=sys.argv[1]) as c:\n" \
           "    c.submit(analysis38.score, 1).result()\n"  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, addresses.scheduler], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 1
    assert "ModuleNotFoundError(\"No module named 'analysis38'\"): the module is not importable where the task ran" \
        in done.stderr, done.stderr[-3000:]  # fmt: skip
    assert "--ship-local-modules" in done.stderr and "register_pickle_by_value" in done.stderr
