"""What a process start imports: the common starts leave out the modules they never use.

Each case runs a start's imports (and, for the worker pool, its settings check) in a fresh interpreter and lists the
heavy modules it loaded that it has no use for. Each such module costs tens to hundreds of milliseconds of CPU per
start, and the test suite starts thousands of these processes. A scheduler executes itself again on glibc's malloc
(scheduler/allocator.py): what it imports before that, it imports twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scaler.scheduler.allocator import MARK

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)

REPORT = """
import sys
unused = {unused!r}
print(" ".join(sorted(name for name in sys.modules if name.startswith(unused))))
"""

#: start -> (the code of the start, the modules (and their submodules) it must not import)
STARTS = {
    # A storage server that is no host cache has no client of another storage server.
    "an object storage server": (
        "import scaler.object_storage.server",
        (
            "scaler.object_storage.host_cache.glue",
            "scaler.object_storage.connection",
            "scaler.object_storage.client_core",
        ),
    ),
    # `scaler_cluster` starts worker processes and waits: it runs no worker and no scaling policy, and it reads no
    # worker manager's settings.
    "a pool of workers (scaler_cluster)": (
        "import scaler.entry_points.cluster\n"
        "from scaler.config.sections import WorkerConfig\n"
        "from scaler.worker_manager.baremetal_native.fixed_pool import check_worker_config\n"
        "config = WorkerConfig(scheduler_address='tcp://127.0.0.1:1', per_worker_capabilities='linux,cpu=2')\n"
        "assert check_worker_config(config) is None",
        (
            "scaler.protocol.messages",
            "scaler.protocol.codec",
            "scaler.worker.agent",
            "scaler.policy.registry",
            "scaler.config.manager_sections",
        ),
    ),
    # A command loads its settings with the loader of scaler.config and no validation library, whose import alone
    # would cost each command start more CPU than the rest of its settings load.
    "a command's settings (scaler_worker ADDRESS)": (
        "from scaler.config.commands import WORKER\n"
        "from scaler.config.loader import load_command\n"
        "load_command(WORKER, ['tcp://127.0.0.1:1'])",
        ("pydantic", "pydantic_settings", "pydantic_core"),
    ),
    # A scheduler and a worker manage no worker: they do not build the worker managers' settings sections.
    "a scheduler (python -m scaler.scheduler.process)": (
        "import scaler.scheduler.process",
        ("scaler.config.manager_sections", "scaler.config.manager_types"),
    ),
    "a worker (python -m scaler.worker.process)": (
        "import scaler.worker.process",
        ("scaler.config.manager_sections", "scaler.config.manager_types"),
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


#: The worker managers' settings sections (scaler.config.manager_sections, which scaler.config.sections names lazily):
#: dataclasses compiles a section's methods when it makes the class, so a process that manages no worker makes none.
MANAGER_SECTIONS = (
    "WorkerManagerSettings",
    "NativeWorkerManagerConfig",
    "CloudUnitSettings",
    "ECSWorkerManagerConfig",
    "EC2WorkerManagerConfig",
    "KubernetesWorkerManagerConfig",
    "AWSHPCWorkerManagerConfig",
    "SymphonyWorkerManagerConfig",
    "SlurmWorkerManagerConfig",
)

MADE = """
import gc
names = {names!r}
print(" ".join(sorted(kind.__name__ for kind in gc.get_objects() if isinstance(kind, type) and kind.__name__ in names)))
"""


@pytest.mark.parametrize("module", ["scaler.scheduler.process", "scaler.worker.process"])
def test_a_start_that_manages_no_worker_makes_no_manager_section(module: str) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", f"import {module}\n" + MADE.format(names=MANAGER_SECTIONS)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == []


#: Runs a scheduler's start with `os.execve` replaced: at the moment the process would execute itself again on glibc's
#: malloc (scheduler/allocator.py), it lists what it has imported that it imports again after (the scheduler, its
#: settings' loader) and exits.
AT_EXECUTE_AGAIN = """
import os, sys
again = ("pydantic", "pydantic_settings", "scaler.config.loader", "scaler.config.sections", "scaler.scheduler.core",
         "scaler.protocol", "zmq")

def report(*arguments):
    print("executed again;", " ".join(sorted(name for name in sys.modules if name.startswith(again))))
    sys.stdout.flush()
    os._exit(0)

os.execve = report
"""

#: start -> its code, run after AT_EXECUTE_AGAIN
SCHEDULER_STARTS = {
    "scaler_scheduler": "from scaler.entry_points.scheduler import main\n"
    "sys.argv = ['scaler_scheduler', '--help']\nmain()",
    "python -m scaler.scheduler.process": "import runpy\nsys.argv = ['scaler.scheduler.process', '{}']\n"
    "runpy.run_module('scaler.scheduler.process', run_name='__main__', alter_sys=True)",
}


def _on_glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


@pytest.mark.skipif(not _on_glibc(), reason="the scheduler executes itself again on glibc only")
@pytest.mark.parametrize("start", list(SCHEDULER_STARTS))
def test_a_scheduler_executes_itself_again_before_it_imports_the_scheduler(start: str) -> None:
    environment = {name: value for name, value in os.environ.items() if name not in ("PYTHONMALLOC", MARK)}
    finished = subprocess.run(
        [sys.executable, "-c", AT_EXECUTE_AGAIN + SCHEDULER_STARTS[start]],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["executed", "again;"]
