"""`event_loop = "uvloop"` where the uvloop package is not installed (it comes with the `uvloop` extra): every command
that runs a section with the setting says so in one line naming the extra, with exit code 2, before it starts
anything (docs/guide/troubleshooting.md, "The commands"), and `SchedulerClusterCombo` raises ValueError at once.

Each case runs in fresh interpreters whose `sitecustomize` (on PYTHONPATH, so their children's too) makes `import
uvloop` fail, as in an environment made by `pip install scaler-compute`. Checked against the code before the check
(`scaler.config.event_loops`): the scheduler started its object storage server and then exited with 1, the cluster
and the worker manager printed a traceback per process and exited with 1, and the combo waited 60 s before raising
"the scheduler ... did not answer", without the cause.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scaler.io.address import free_tcp_port_block
from scaler_rehearsal.process_groups import signal_group
from tests.integration.conftest import BIN_DIR

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

MESSAGE = (
    "event loop 'uvloop' needs the uvloop package, which is not installed: pip install 'scaler-compute[uvloop]', "
    "or use the builtin event loop"
)

WITHOUT_UVLOOP = (
    'import sys\n\nsys.modules["uvloop"] = None  # `import uvloop` raises ImportError; find_spec finds none\n'
)

COMBO = """
import time

import psutil

from scaler import SchedulerClusterCombo

started = time.monotonic()
try:
    SchedulerClusterCombo(n_workers=1, event_loop="uvloop")
except ValueError as error:
    print(error)
    print(f"{time.monotonic() - started:.1f} s, {len(psutil.Process().children())} children")
"""


def run_without_uvloop(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `argv` where uvloop cannot be imported (with `env` added to the environment); its whole process group is
    killed if it outlives 90 s."""
    site = cwd / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(WITHOUT_UVLOOP)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **(env or {}), "PYTHONPATH": path}
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{argv[0]} was still running after 90 s; its output:\n{stdout}\n{stderr}")
    finally:
        signal_group(process, signal.SIGKILL)  # whatever it started; a no-op once reaped (the id may be reused)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def free_address() -> str:
    return f"tcp://127.0.0.1:{free_tcp_port_block(3)}"


COMMANDS = {
    "scheduler": lambda: ["scaler_scheduler", free_address(), "-e", "uvloop"],
    "cluster": lambda: ["scaler_cluster", "-n", "1", free_address(), "-e", "uvloop"],
    "worker": lambda: ["scaler_worker", free_address(), "--event-loop", "uvloop"],
    "worker_manager": lambda: ["scaler_worker_manager", "baremetal_native", free_address(), "-e", "uvloop"],
    "worker_adapter": lambda: ["scaler_worker_adapter_native", free_address(), "-e", "uvloop"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_refuses_uvloop_in_one_line(name: str, tmp_path: Path) -> None:
    command, *arguments = COMMANDS[name]()
    done = run_without_uvloop([str(BIN_DIR / command), *arguments], tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == "", "nothing started"
    prog = f"{command} baremetal_native" if command == "scaler_worker_manager" else command
    assert done.stderr.splitlines() == [f"{prog}: error: {MESSAGE}"]


def test_a_config_file_or_the_environment_asks_for_uvloop(tmp_path: Path) -> None:
    address = free_address()
    (tmp_path / "worker.toml").write_text(f'[worker]\nscheduler_address = "{address}"\nevent_loop = "uvloop"\n')
    done = run_without_uvloop([str(BIN_DIR / "scaler_worker"), "-c", "worker.toml"], tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"scaler_worker: error: {MESSAGE}\n")
    done = run_without_uvloop([str(BIN_DIR / "scaler_scheduler"), address], tmp_path, {"SCALER_EVENT_LOOP": "uvloop"})
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"scaler_scheduler: error: {MESSAGE}\n")


@pytest.mark.parametrize(
    "section, named",
    [
        ('[scheduler]\nbind_address = "{address}"\nevent_loop = "uvloop"\n', "[scheduler]"),
        (
            '[scheduler]\nbind_address = "{address}"\n\n[[worker_manager]]\ntype = "baremetal_native"\n'
            'worker_manager_id = "local"\nevent_loop = "uvloop"\n',
            "[[worker_manager]] 'local':",
        ),
    ],
    ids=["scheduler", "worker_manager"],
)
def test_the_launcher_refuses_a_file_asking_for_uvloop(section: str, named: str, tmp_path: Path) -> None:
    (tmp_path / "stack.toml").write_text(section.format(address=free_address()))
    done = run_without_uvloop([str(BIN_DIR / "scaler"), "stack.toml"], tmp_path)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines() == [f"scaler: error: stack.toml: {named} {MESSAGE}"]


def test_the_combo_raises_at_once(tmp_path: Path) -> None:
    done = run_without_uvloop([sys.executable, "-c", COMBO], tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    message, timing = done.stdout.splitlines()
    assert message == f"SchedulerClusterCombo: {MESSAGE}"
    seconds, children = timing.split(" s, ")
    assert float(seconds) < 5 and children == "0 children", timing
