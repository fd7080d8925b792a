"""What a process start imports: the common starts leave out the modules they never use.

Each case runs a start's imports (and, for the worker pool, its settings check) in a fresh interpreter and lists the
heavy modules it loaded that it has no use for. Each such module costs tens to hundreds of milliseconds of CPU per
start, and the test suite starts thousands of these processes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)

REPORT = """
import sys
unused = {unused!r}
print(" ".join(sorted(name for name in sys.modules if name.startswith(unused))))
"""

#: start -> (the code of the start, the modules (and their submodules) it must not import)
STARTS = {
    # `scaler_scheduler` executes itself again for glibc's malloc before anything else (scheduler/allocator.py): what
    # its module imports before that is paid twice.
    "the scheduler command before it executes itself again": (
        "import scaler.entry_points.scheduler",
        ("pydantic", "pydantic_settings", "scaler.config.loader", "scaler.config.sections", "scaler.scheduler.process"),
    ),
    # A storage server that is no host cache has no client of another storage server.
    "an object storage server": (
        "import scaler.object_storage.server",
        (
            "scaler.object_storage.host_cache.glue",
            "scaler.object_storage.connection",
            "scaler.object_storage.client_core",
        ),
    ),
    # `scaler_cluster` starts worker processes and waits: it runs no worker and no scaling policy.
    "a pool of workers (scaler_cluster)": (
        "import scaler.entry_points.cluster\n"
        "from scaler.config.sections import WorkerConfig\n"
        "from scaler.worker_manager.baremetal_native.fixed_pool import check_worker_config\n"
        "config = WorkerConfig(scheduler_address='tcp://127.0.0.1:1', per_worker_capabilities='linux,cpu=2')\n"
        "assert check_worker_config(config) is None",
        ("scaler.protocol.messages", "scaler.protocol.codec", "scaler.worker.agent", "scaler.policy.registry"),
    ),
}


@pytest.mark.parametrize("start", list(STARTS))
def test_a_start_imports_nothing_it_does_not_use(start: str) -> None:
    code, unused = STARTS[start]
    finished = subprocess.run(
        [sys.executable, "-c", code + "\n" + REPORT.format(unused=unused)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == []
