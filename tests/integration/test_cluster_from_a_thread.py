"""issue 60, item 12: a local cluster started from a thread lives until it is shut down or its process exits.

The kernel's parent-death signal (PR_SET_PDEATHSIG) follows the *thread* that forked a child: a
`SchedulerClusterCombo` (or the Ray front end's `ray.init()`) made in a thread that then ended lost its host at
once, SIGKILLed, and a client waited 15 s for an answer. Children are started from a thread that lasts as long
as the process now (`scaler.io.child_processes`). Both tests were checked to fail before that: the combo's task
got "no scheduler answered", `ray.get` an object storage that "is not reachable".
"""

from __future__ import annotations

import signal
import subprocess
import sys

import psutil
import pytest

from tests.integration.conftest import COLD_START_SECONDS, ProcessWatch, is_alive, run_script, wait_all_gone

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

COMBO_IN_A_THREAD = """
import os, sys, threading
from scaler import Client, SchedulerClusterCombo

made = {}
thread = threading.Thread(target=lambda: made.update(cluster=SchedulerClusterCombo(n_workers=1)))
thread.start()
thread.join()
cluster = made["cluster"]
with Client(cluster.get_address(), timeout_seconds=30) as client:
    print("result", client.submit(pow, 2, 10).result(timeout=60), flush=True)
print("host", cluster._host.pid, flush=True)
sys.stdin.read()  # until the test kills this process
"""


def test_a_combo_made_in_a_thread_that_ended_lives_until_its_process_exits(processes: ProcessWatch) -> None:
    """It runs a task after its thread ended; the program then SIGKILLed (no shutdown, no atexit), the cluster's
    processes go with it."""
    program = processes.add(
        subprocess.Popen(
            [sys.executable, "-c", COMBO_IN_A_THREAD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    )
    assert program.stdout is not None
    lines = [program.stdout.readline() for _ in range(2)]
    assert lines[0] == "result 1024\n", "".join(lines) + program.stdout.read()
    host = psutil.Process(int(lines[1].split()[1]))
    cluster = [host, *host.children(recursive=True)]
    assert len(cluster) >= 4 and all(is_alive(process) for process in cluster)  # storage, scheduler, a worker
    processes.remember()
    program.send_signal(signal.SIGKILL)
    program.wait()
    wait_all_gone(cluster, "the cluster's processes to end with the program that made it", COLD_START_SECONDS)


RAY_INIT_IN_A_THREAD = """
import threading
from scaler.compat import ray

thread = threading.Thread(target=lambda: ray.init(num_cpus=1))
thread.start()
thread.join()

@ray.remote
def double(x):
    return 2 * x

print("result", ray.get(double.remote(21), timeout=60))
ray.shutdown()
"""


def test_ray_init_in_a_thread_that_ended_keeps_its_cluster() -> None:
    done = run_script(RAY_INIT_IN_A_THREAD, timeout_seconds=COLD_START_SECONDS)
    assert done.returncode == 0 and "result 42" in done.stdout, done.stdout + done.stderr


FRESH_HOST_IMPORTS = """
import os, threading, time
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()  # two OS threads: the host is a fresh interpreter
from scaler import SchedulerClusterCombo
from tests.integration.conftest import wait_for_workers

os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # read at start-up: the host and what it forks say what they import
with SchedulerClusterCombo(n_workers=2) as cluster:
    wait_for_workers(cluster.monitor_address, 2)
"""


def test_a_fresh_host_imports_what_its_workers_run_once_before_it_forks_them() -> None:
    """A cluster started from a process with threads has its host start as a fresh interpreter: the worker agent's
    and processor's modules are imported there, once, not by each worker after the fork (about 0.04 s of CPU a
    worker). Python's import-time log of the host and its children lists each module once per process that imported
    it. Checked to fail with the host's `import_runtime()` removed: both modules are listed twice (one per worker)."""
    done = run_script(FRESH_HOST_IMPORTS, timeout_seconds=COLD_START_SECONDS)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert imported.count("scaler.worker.agent.shell") == 1, imported
    assert imported.count("scaler.worker.processor.process") == 1, imported
