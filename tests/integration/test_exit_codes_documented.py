"""#38 finding 4: the exit codes the docs give (docs/guide/clusters.md): `scaler_cluster` whose workers all failed
to reach a scheduler exits 2 (it exited 0), a misspelt `policy_content` is refused with exit code 2 before anything
starts, by `scaler FILE` (it exited 1 after starting object storage) and by `scaler_scheduler` (1).

Checked by switching the mechanisms off: with `run_worker_pool` returning OK when its workers all exited, the first
test fails (0); without the launcher's `policy_problem` call, `scaler FILE` starts object storage and exits 1."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from scaler.config.example_files import example_text
from scaler.io.address import free_tcp_port_block
from scaler.protocol.exit_codes import EXIT_CONFIGURATION, ExitCode
from scaler.worker_manager.baremetal_native.fixed_pool import pool_exit_code
from tests.integration.conftest import BIN_DIR, free_addresses

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN_DIR / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=90, cwd=cwd,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_pool_takes_the_code_its_workers_share() -> None:
    assert pool_exit_code([0, 0]) == ExitCode.OK
    assert pool_exit_code([2, 2]) == ExitCode.NEVER_CONNECTED
    assert pool_exit_code([3, 0, 3]) == ExitCode.SCHEDULER_LOST
    assert pool_exit_code([2, 3]) == ExitCode.ERROR
    assert pool_exit_code([-9]) == ExitCode.ERROR


def test_scaler_cluster_whose_workers_never_reached_a_scheduler_exits_2() -> None:
    nobody = f"tcp://127.0.0.1:{free_tcp_port_block(1)}"
    done = run("scaler_cluster", "-n", "2", nobody, "--death-timeout-seconds", "2")
    assert done.returncode == ExitCode.NEVER_CONNECTED, done.stdout[-3000:] + done.stderr[-3000:]
    assert "every worker of this pool exited, none of them cleanly: exiting with code 2" in done.stdout + done.stderr


def test_a_misspelt_policy_is_refused_with_2_before_anything_starts(tmp_path: Path) -> None:
    addresses = free_addresses()
    text = example_text("local").replace("scaling=work", "scaling=wrok")
    text = text.replace("tcp://127.0.0.1:8516", addresses.scheduler).replace(
        "tcp://127.0.0.1:8517", addresses.object_storage
    )
    (tmp_path / "typo.toml").write_text(text)
    done = run("scaler", "typo.toml", cwd=tmp_path)
    assert done.returncode == EXIT_CONFIGURATION, done.stdout + done.stderr
    assert done.stdout == "", "nothing started"
    assert done.stderr.startswith("scaler: error: typo.toml: [scheduler] policy_content") and "'wrok'" in done.stderr
    done = run("scaler_scheduler", addresses.scheduler, "--policy-content", "allocate=even_load; scaling=wrok")
    assert done.returncode == EXIT_CONFIGURATION, done.stdout + done.stderr
    assert "'wrok' is not one of" in done.stdout + done.stderr


@pytest.mark.parametrize("dashboard", [False, True], ids=["alone", "with-dashboard"])
def test_a_manager_that_exits_before_it_registers_is_named(tmp_path: Path, dashboard: bool) -> None:
    """`scaler FILE` announces a worker manager once it has registered; one that exits first (here symphony, whose
    soamapi this machine lacks) stops the start-up naming it, before a script waiting for its line goes on; also
    when it exits while the dashboard, started with it, is waited for."""
    addresses = free_addresses()
    gui = (f'[gui]\nmonitor_address = "{addresses.monitor}"\ngui_address = "127.0.0.1:{free_tcp_port_block(1)}"\n\n'
           if dashboard else "")  # fmt: skip
    (tmp_path / "sym.toml").write_text(
        f'[scheduler]\nbind_address = "{addresses.scheduler}"\n\n{gui}'
        '[[worker_manager]]\ntype = "symphony"\nworker_manager_id = "sym"\nservice_name = "ScalerService"\n'
    )
    done = run("scaler", "sym.toml", cwd=tmp_path)
    assert done.returncode == ExitCode.ERROR, done.stdout + done.stderr
    assert "worker manager 'sym' (symphony) exited before it registered with the scheduler (exit code 2)" in (
        done.stdout + done.stderr
    )
    assert "scaler: worker manager 'sym'" not in done.stdout, "never announced"


def test_ctrl_c_while_the_scheduler_waits_for_its_object_storage_stops_it_cleanly() -> None:
    """`scaler_scheduler ADDRESS -osa STORAGE` waits up to 10 s for a storage server that does not answer yet.
    Walking docs/configuration.md (`scaler_scheduler --config scheduler.toml tcp://...`, its [scheduler] naming an
    object_storage_address no server answered), the wait printed nothing, and Ctrl-C in it ended the scheduler with a
    KeyboardInterrupt's traceback: now the wait says so after a second, and Ctrl-C stops the scheduler with exit
    code 0 and one line."""
    addresses = free_addresses()
    scheduler = subprocess.Popen(
        [str(BIN_DIR / "scaler_scheduler"), addresses.scheduler, "-osa", addresses.object_storage],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        preexec_fn=_sigint_as_in_a_terminal,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in scheduler.stdout or ()], daemon=True)
    reader.start()
    try:
        seen: list[str] = []
        while not any("does not answer yet: waiting up to 9 s more for it" in line for line in seen):
            try:
                seen.append(lines.get(timeout=30))
            except queue.Empty:
                raise AssertionError(f"the wait was not said: {''.join(seen)}") from None
        scheduler.send_signal(signal.SIGINT)
        scheduler.wait(timeout=30)
        reader.join(timeout=30)
        rest = "".join(iter_queue(lines))
    finally:
        if scheduler.poll() is None:
            scheduler.kill()
            scheduler.wait()
        reader.join(timeout=30)
        if scheduler.stdout is not None:
            scheduler.stdout.close()
    assert scheduler.returncode == ExitCode.OK, "".join(seen) + rest
    assert "Traceback" not in rest and "scheduler stopped: received SIGINT while starting" in rest, rest


def test_ctrl_c_while_a_command_imports_ends_it_with_one_line_and_as_interrupted() -> None:
    """A Ctrl-C in a command's first half second (on a slow machine, while its modules import, before its own signal
    handling is in place) printed a KeyboardInterrupt's traceback of 25-37 lines. The console commands' package makes
    it one line; the process still ends as killed by SIGINT (a shell sees 130). The interrupt is sent by the process
    to itself once the package is imported, so that when it lands does not depend on the machine's speed."""
    interrupted = subprocess.run(
        [sys.executable, "-c", "import os, signal, time\nimport scaler.entry_points\n"
         "os.kill(os.getpid(), signal.SIGINT)\ntime.sleep(60)"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, preexec_fn=_sigint_as_in_a_terminal,
    )  # fmt: skip
    assert interrupted.returncode == -signal.SIGINT, interrupted
    assert interrupted.stderr == "scaler: interrupted (Ctrl-C)\n", interrupted.stderr
    other_error = subprocess.run(
        [sys.executable, "-c", "import scaler.entry_points\nraise ValueError('not an interrupt')"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert other_error.returncode == 1 and "Traceback" in other_error.stderr, other_error.stderr
    assert "ValueError: not an interrupt" in other_error.stderr, other_error.stderr


def _sigint_as_in_a_terminal() -> None:
    """In the child before it starts: SIGINT as a terminal's command has it. A test process of pytest-xdist ignores
    SIGINT, and a process started ignoring it keeps ignoring it (Python then installs no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def iter_queue(lines: queue.Queue[str]) -> list[str]:
    taken: list[str] = []
    while not lines.empty():
        taken.append(lines.get_nowait())
    return taken
