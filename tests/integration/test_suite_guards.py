"""The suite's own guards, tried on small pytest runs configured as the suite is (pyproject's pytest settings, its
plugins): a test that overruns its timeout, in its body or in its teardown, fails alone and the run goes on
(tests/phase_timeouts.py); whatever a run started is removed when it ends, however it ends (tests/run_reaper.py).

Checked with the guards switched off: with pyproject's pytest settings as they were (one pytest-timeout timer over the
whole test, no tests.phase_timeouts), the hanging teardown after a hanging body never ends (the run is killed at its
bound) and the slow report ends the run in an INTERNALERROR; without tests.run_reaper the orphan, the namespace and the
memory cgroup outlive the killed run, and the crashed worker's orphan is still there for the next test.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import pid_is_alive, wait_for

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

REPOSITORY = Path(__file__).resolve().parents[2]
#: The inner runs' timeout: short, so that each hang costs seconds.
INNER_TIMEOUT_SECONDS = 3
#: The inner runs' own bound: a run that has not ended by then never would.
RUN_BOUND_SECONDS = 120.0


def suite_settings(timeout: int) -> str:
    """pyproject's pytest settings as an inner run's pytest.ini, with a short timeout."""
    settings = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    lines = ["[pytest]"]
    for key, value in settings.items():
        if key in ("testpaths", "markers"):
            continue
        if key == "timeout":
            value = timeout
        if isinstance(value, list):
            lines.append(f"{key} =\n" + "\n".join(f"    {item}" for item in value))
        else:
            lines.append(f"{key} = {str(value).lower() if isinstance(value, bool) else value}")
    return "\n".join(lines) + "\n"


def inner_run(folder: Path, *args: str, started: list[subprocess.Popen[str]] | None = None) -> subprocess.Popen[str]:
    (folder / "pytest.ini").write_text(suite_settings(INNER_TIMEOUT_SECONDS))
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    environment.pop("PYTEST_XDIST_WORKER", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args],
        cwd=folder, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if started is not None:
        started.append(process)
    return process


def finished(process: subprocess.Popen[str]) -> str:
    """The run's output once it ended; fails (killing it) if it outlives RUN_BOUND_SECONDS."""
    try:
        output, _ = process.communicate(timeout=RUN_BOUND_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"the run did not end within {RUN_BOUND_SECONDS:g} s; its output:\n{output}") from None
    return output


def outcomes(output: str) -> dict[str, str]:
    """test name -> its outcomes in the run's summary, sorted and joined (`ERROR+FAILED`: a failed body and an
    erroring teardown)."""
    found: dict[str, set[str]] = {}
    for outcome, name in re.findall(r"^(PASSED|FAILED|ERROR) \S+::(\w+)", output, re.MULTILINE):
        found.setdefault(name, set()).add(outcome)
    return {name: "+".join(sorted(names)) for name, names in found.items()}


HANGS = """
import threading

import pytest


@pytest.fixture
def stuck_teardown():
    yield
    threading.Event().wait()  # a teardown that never ends


@pytest.fixture
def two_stuck_finalizers(request):
    request.addfinalizer(lambda: threading.Event().wait())
    request.addfinalizer(lambda: threading.Event().wait())


def test_1_body_hangs():
    threading.Event().wait()


def test_2_teardown_hangs(stuck_teardown):
    pass


def test_3_body_and_teardown_hang(stuck_teardown):
    threading.Event().wait()


def test_4_two_finalizers_hang(two_stuck_finalizers):
    pass


def test_5_runs_after_them():
    pass
"""

SLOW_REPORT = """
import time

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        time.sleep({seconds})  # a report that takes long to make (a long traceback on a loaded machine)
    return report
"""

FAILS_LATE = """
import time


def test_1_fails_near_its_timeout():
    time.sleep({seconds})
    assert False, "failing late"


def test_2_runs_after_it():
    pass
"""


def test_a_hang_in_a_body_or_a_teardown_fails_that_test_alone(tmp_path: Path) -> None:
    """Bodies and teardowns that never end: each overrun is that test's failure (its body) or error (its teardown),
    every stuck finalizer is interrupted, and the last test still runs and passes."""
    (tmp_path / "test_hangs.py").write_text(HANGS)
    output = finished(inner_run(tmp_path))
    assert "INTERNALERROR" not in output, output
    assert outcomes(output) == {
        "test_1_body_hangs": "FAILED",
        "test_2_teardown_hangs": "ERROR+PASSED",
        "test_3_body_and_teardown_hang": "ERROR+FAILED",
        "test_4_two_finalizers_hang": "ERROR+PASSED",
        "test_5_runs_after_them": "PASSED",
    }, output
    assert "did not finish within 3 s" in output, output


def test_no_timer_fires_while_pytest_reports(tmp_path: Path) -> None:
    """A test that fails just before its timeout and whose report takes longer than what is left: the report is made
    in peace (no INTERNALERROR), and the next test runs."""
    (tmp_path / "conftest.py").write_text(SLOW_REPORT.format(seconds=INNER_TIMEOUT_SECONDS))
    (tmp_path / "test_late.py").write_text(FAILS_LATE.format(seconds=INNER_TIMEOUT_SECONDS - 1))
    output = finished(inner_run(tmp_path))
    assert "INTERNALERROR" not in output, output
    assert outcomes(output) == {"test_1_fails_near_its_timeout": "FAILED", "test_2_runs_after_it": "PASSED"}, output


# ---------------------------------------------------------------- the reaper

#: Forks twice: the grandchild, in a session of its own and reparented to init, writes its pid and sleeps.
ORPHAN = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[1] + ".tmp", "w") as file:
            file.write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(600)
    os._exit(0)
os.waitpid(-1, 0)
"""

LEAVES = """
import os
import subprocess
import sys
import time
from pathlib import Path

ORPHAN = {orphan!r}
HERE = Path(__file__).parent
PRIVILEGED = {privileged}


def leave_things(name):
    subprocess.run([sys.executable, "-c", ORPHAN, str(HERE / f"{{name}}.pid")], check=True)
    while not (HERE / f"{{name}}.pid").exists():
        time.sleep(0.05)
    (HERE / f"{{name}}.creator").write_text(str(os.getpid()))
    if PRIVILEGED:
        subprocess.run(["ip", "netns", "add", f"scaler{{os.getpid()}}n0"], check=True)
        Path(f"/sys/fs/cgroup/memory/scaler-test-{{os.getpid()}}-{{name}}").mkdir()


def test_1_leaves_things_and_hangs():
    leave_things("hung")
    (HERE / "ready").write_text("")
    time.sleep(600)


def test_2_its_worker_dies():
    leave_things("crashed")
    os.kill(os.getpid(), 9)


def test_3_what_the_dead_worker_left_is_gone():
    pid, creator = int((HERE / "crashed.pid").read_text()), (HERE / "crashed.creator").read_text()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{{pid}}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{{pid}}").exists(), "the crashed worker's orphan is still running"
    if PRIVILEGED:
        namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"scaler{{creator}}n0" not in namespaces
        assert not list(Path("/sys/fs/cgroup/memory").glob(f"scaler-test-{{creator}}-*"))
"""


def privileged() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None and Path("/sys/fs/cgroup/memory/cgroup.procs").exists()


def made_by(creator: int) -> list[str]:
    """The namespace and memory cgroup an inner test made."""
    if not privileged():
        return []
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found = [line.split()[0] for line in namespaces.splitlines() if line.startswith(f"scaler{creator}n")]
    return found + [str(group) for group in Path("/sys/fs/cgroup/memory").glob(f"scaler-test-{creator}-*")]


@pytest.fixture
def inner_runs(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """The inner runs; afterwards (whatever the test found) nothing they made is left."""
    runs: list[subprocess.Popen[str]] = []
    yield runs
    for process in runs:
        if process.poll() is None:
            process.kill()
            process.communicate()
    for pid_file in tmp_path.glob("*.pid"):
        pid = int(pid_file.read_text())
        if pid_is_alive(pid):
            os.kill(pid, signal.SIGKILL)
    for creator_file in tmp_path.glob("*.creator"):
        creator = int(creator_file.read_text())
        subprocess.run(["ip", "netns", "delete", f"scaler{creator}n0"], capture_output=True, check=False)
        for group in Path("/sys/fs/cgroup/memory").glob(f"scaler-test-{creator}-*"):
            group.rmdir()


def test_what_a_killed_run_started_is_removed(tmp_path: Path, inner_runs: list[subprocess.Popen[str]]) -> None:
    """A run SIGKILLed in the middle of a test: its watchdog removes the orphan the test made (in a session of its own,
    reparented to init), and as root its network namespace and memory cgroup."""
    (tmp_path / "test_leaves.py").write_text(LEAVES.format(orphan=ORPHAN, privileged=privileged()))
    run = inner_run(tmp_path, "-k", "test_1", started=inner_runs)
    wait_for(lambda: (tmp_path / "ready").exists() or run.poll() is not None, "the inner test to leave its things", 60)
    orphan, creator = int((tmp_path / "hung.pid").read_text()), int((tmp_path / "hung.creator").read_text())
    assert made_by(creator) or not privileged(), "the inner test made no namespace or cgroup"
    run.send_signal(signal.SIGKILL)
    output, _ = run.communicate()  # its end, and the watchdog's (which writes there too)
    wait_for(lambda: not pid_is_alive(orphan), f"the killed run's orphan to be gone; the run's output:\n{output}")
    assert not made_by(creator), f"the killed run's namespace and memory cgroup are left; its output:\n{output}"


def test_what_a_crashed_worker_started_is_removed_at_once(
    tmp_path: Path, inner_runs: list[subprocess.Popen[str]]
) -> None:
    """A pytest-xdist worker dies in a test: the test fails, a new worker runs the next test, and by then the orphan
    (and as root the namespace and memory cgroup) the dead worker's test made are gone."""
    (tmp_path / "test_leaves.py").write_text(LEAVES.format(orphan=ORPHAN, privileged=privileged()))
    output = finished(inner_run(tmp_path, "-n", "1", "-k", "test_2 or test_3", started=inner_runs))
    assert "crashed while running" in output, output
    assert outcomes(output) == {
        "test_2_its_worker_dies": "FAILED",
        "test_3_what_the_dead_worker_left_is_gone": "PASSED",
    }, output


#: A test that starts a helper holding the read end of a pipe only the test process writes to: the helper ends once
#: that process is gone, after a short cleanup, as multiprocessing's resource tracker does when its last holder exits.
OUTLIVES_BRIEFLY = """
import os
import subprocess
import sys
from pathlib import Path

HELPER = '''
import os, sys, time
while os.read(int(sys.argv[1]), 1):
    pass
time.sleep(0.5)  # its cleanup, once every writer is gone
open(sys.argv[2], "w").close()
'''


def test_starts_a_helper_that_ends_after_this_process():
    read, write = os.pipe()
    ended = Path(__file__).parent / "helper-ended"
    helper = subprocess.Popen([sys.executable, "-c", HELPER, str(read), str(ended)], pass_fds=(read,))
    os.close(read)
    (Path(__file__).parent / "helper.pid").write_text(str(helper.pid))
    globals()["held"] = (write, helper)  # until this test process exits
"""


def test_a_process_that_ends_just_after_the_test_process_is_let_end(
    tmp_path: Path, inner_runs: list[subprocess.Popen[str]]
) -> None:
    """A helper that a pytest-xdist worker's test started, and that ends on its own once that worker is gone (as the
    worker's resource trackers do), is let end by the run's reaper: not killed, not reported as left behind."""
    (tmp_path / "test_outlives.py").write_text(OUTLIVES_BRIEFLY)
    output = finished(inner_run(tmp_path, "-n", "1", started=inner_runs))
    assert outcomes(output) == {"test_starts_a_helper_that_ends_after_this_process": "PASSED"}, output
    assert "left behind by the run" not in output, output
    assert (tmp_path / "helper-ended").exists(), f"the helper did not end on its own; the run's output:\n{output}"
