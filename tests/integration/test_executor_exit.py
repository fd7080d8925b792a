"""At interpreter exit, an executor's work submitted and never waited for runs to its end (as with the standard
library's pools), and a submit from an exit hook raises RuntimeError, in a fresh interpreter against a real cluster.

Checked by switching the mechanism off: without `threading._register_atexit(_at_exit)` in scaler/client/executor.py,
the first test's interpreter exits before the task prints (its stdout has no "apple") and the second's submit from
its exit hook does not raise."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from scaler import SchedulerClusterCombo
from tests.integration.conftest import running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_executor_exit"), pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    cluster: SchedulerClusterCombo
    with running_cluster(1) as cluster:
        yield cluster.get_address()


def run(source: str, address: str) -> subprocess.CompletedProcess[str]:
    script = f"ADDRESS = {address!r}\n" + textwrap.dedent(source)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_work_never_waited_for_runs_before_the_interpreter_exits(address: str) -> None:
    done = run(
        """
        import time
        from scaler import Client

        def sleep_and_print(seconds, text):
            time.sleep(seconds)
            print(text, flush=True)

        client = Client(address=ADDRESS, stream_output=True)
        executor = client.executor()
        executor.submit(sleep_and_print, 1.0, "apple")
        executor.shutdown(wait=False)
        """,
        address,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("apple"), (done.stdout, done.stderr)


def test_a_submit_from_an_exit_hook_raises(address: str) -> None:
    done = run(
        """
        import atexit
        from scaler import Client

        @atexit.register
        def run_last():
            try:
                executor.submit(id, None)
            except RuntimeError as error:
                print("runtime-error:", error)

        client = Client(address=ADDRESS)
        executor = client.executor()
        """,
        address,
    )
    assert done.returncode == 0, done.stderr
    assert "runtime-error: cannot schedule new futures after interpreter shutdown" in done.stdout, done.stderr
