"""The core examples of the user documentation (shared/seeds 000-002) run as written; only the port is
adapted. Each script runs in its own interpreter, as a user would run it."""

from __future__ import annotations

import subprocess

import psutil
import pytest

from tests.integration.conftest import (
    BIN_DIR,
    DEADLINE_SECONDS,
    free_addresses,
    is_alive,
    probe_scheduler,
    run_script,
    wait_for,
)

pytestmark = pytest.mark.integration

SEED_PORT = "2345"

# seed 002: "submit math.sqrt over range(100)"
SQRT_SUM = """
import math
from scaler import Client

with Client(address="tcp://127.0.0.1:2345") as client:
    # Submits 100 tasks
    futures = [
        client.submit(math.sqrt, i)
        for i in range(0, 100)
    ]

    # Collects the results and sums them
    result = sum(future.result() for future in futures)

    print(result) # 661.46
"""

# seed 002: "connect and submit tasks from a client in your Python code"
SQUARE = """
from scaler import Client

def square(value: int):
    return value * value

with Client(address="tcp://127.0.0.1:2345") as client:
    future = client.submit(square, 4)
    print(future.result()) # 16
"""

# seed 002: "A local scheduler and a local set of workers can be conveniently spawn using SchedulerClusterCombo";
# the "..." of the seed is the sqrt example
COMBO = """
from scaler import SchedulerClusterCombo

cluster = SchedulerClusterCombo(address="tcp://127.0.0.1:2345", n_workers=4)
{body}
cluster.shutdown()
"""

# seed 002: "supply uvloop ... as a keyword argument for event_loop"
COMBO_UVLOOP = """
from scaler import SchedulerClusterCombo

scheduler = SchedulerClusterCombo(address="tcp://127.0.0.1:2345", event_loop="uvloop", n_workers=4)
{body}
scheduler.shutdown()
"""

# seeds 000/001: protected mode off, and uvloop, through the programmatic API
COMBO_UNPROTECTED = """
from scaler import SchedulerClusterCombo

port = {port}
cluster = SchedulerClusterCombo(
    address=f"tcp://127.0.0.1:{{port}}",
    n_workers=2,
    protected=False, # this will turn off protected mode
)
{body}
from scaler import Client
Client(address=f"tcp://127.0.0.1:{{port}}").shutdown()
cluster.shutdown()
"""

COMBO_TWO_WORKERS_UVLOOP = """
from scaler import SchedulerClusterCombo

port = {port}
cluster = SchedulerClusterCombo(
    address=f"tcp://127.0.0.1:{{port}}",
    n_workers=2,
    event_loop="uvloop"
)
{body}
cluster.shutdown()
"""


def with_port(script: str, port: int) -> str:
    return script.replace(SEED_PORT, str(port))


def assert_prints_sqrt_sum(output: str) -> None:
    """The sum is printed on a line of its own (local clusters log to the same stdout)."""
    assert any(line.startswith("661.46") for line in output.splitlines()), output


def processes_mentioning(text: str) -> list[psutil.Process]:
    """Living processes whose command line mentions `text` (the test's unique address)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any(text in part for part in process.info["cmdline"] or ()) and is_alive(process):
                found.append(process)
        except psutil.Error:
            continue
    return found


def assert_nothing_left(address: str) -> None:
    wait_for(lambda: not processes_mentioning(address), f"no process of {address} left", DEADLINE_SECONDS)


@pytest.mark.timeout(90)
def test_seed_scheduler_and_cluster_commands_serve_the_seed_client_scripts(launcher):
    port = int(free_addresses().scheduler.rsplit(":", 1)[1])
    address = f"tcp://127.0.0.1:{port}"
    launcher.start("scaler_scheduler", address)
    probe_scheduler(address)
    launcher.start("scaler_cluster", "-n", "4", address)

    sqrt_sum = run_script(with_port(SQRT_SUM, port), timeout_seconds=60)
    assert sqrt_sum.returncode == 0, sqrt_sum.stderr
    assert_prints_sqrt_sum(sqrt_sum.stdout)

    square = run_script(with_port(SQUARE, port), timeout_seconds=60)
    assert square.returncode == 0, square.stderr
    assert square.stdout.split() == ["16"]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("script", [COMBO, COMBO_UVLOOP], ids=["builtin_loop", "uvloop"])
def test_seed_scheduler_cluster_combo_with_four_workers_runs_and_shuts_down(script):
    port = int(free_addresses().scheduler.rsplit(":", 1)[1])
    body = SQRT_SUM.replace(SEED_PORT, str(port))
    finished = run_script(with_port(script, port).replace("{body}", body), timeout_seconds=60)
    assert finished.returncode == 0, finished.stderr
    assert_prints_sqrt_sum(finished.stdout)
    assert_nothing_left(f"127.0.0.1:{port}")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("script", [COMBO_UNPROTECTED, COMBO_TWO_WORKERS_UVLOOP], ids=["unprotected", "uvloop"])
def test_seed_configuration_examples_of_scheduler_cluster_combo_run(script):
    port = int(free_addresses().scheduler.rsplit(":", 1)[1])
    body = SQUARE.replace(SEED_PORT, str(port))
    finished = run_script(script.format(port=port, body=body), timeout_seconds=60)
    assert finished.returncode == 0, finished.stderr
    assert "16" in finished.stdout.splitlines()
    assert_nothing_left(f"127.0.0.1:{port}")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("command", "settings"),
    [
        ("scaler_scheduler", ["--object-storage-address", "--protected", "--worker-timeout-seconds", "--event-loop"]),
        ("scaler_cluster", ["--num-of-workers", "--death-timeout-seconds", "--preload", "--per-worker-capabilities"]),
        ("scaler_object_storage_server", ["bind_address", "--logging-level", "--config"]),
    ],
)
def test_seed_help_of_each_command_exits_0_listing_its_settings(command, settings):
    finished = subprocess.run([str(BIN_DIR / command), "-h"], capture_output=True, text=True, timeout=DEADLINE_SECONDS)
    assert finished.returncode == 0, finished.stderr
    for setting in settings:
        assert setting in finished.stdout
