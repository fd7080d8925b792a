"""tests/reaping.py's removal of what a killed run left, for the part that needs no privileges: the session's
configuration folder (tests/conftest.py names it after the pytest process that made it) and a killed worker's
computing-marks folder (named after its pid)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from tests.reaping import remove_config_homes, remove_marks_directories


def test_a_killed_runs_configuration_folder_is_removed_and_others_are_kept(tmp_path: Path) -> None:
    """Fails if remove_named stops sweeping configuration folders (the run's folder stays)."""
    killed_runs = tmp_path / "scaler-test-config-4242-abc"
    (killed_runs / "scaler" / "keys").mkdir(parents=True)
    other_runs = tmp_path / "scaler-test-config-4343-def"
    other_runs.mkdir()
    unrelated = tmp_path / "scaler-test-config-notapid"
    unrelated.mkdir()

    removed = remove_config_homes({4242}, tmp_path)

    assert removed == [f"configuration folder {killed_runs}"]
    assert not killed_runs.exists()
    assert other_runs.exists() and unrelated.exists()


def test_a_killed_workers_marks_folder_is_removed_and_others_are_kept(tmp_path: Path) -> None:
    killed, other = tmp_path / "scaler-marks-4242-1f2e3d4c-abc", tmp_path / "scaler-marks-4343-1f2e3d4c-def"
    for directory in (killed, other):
        directory.mkdir()
        (directory / "mark").write_text("task")
    removed = remove_marks_directories({4242}, parents=(tmp_path,))
    assert removed == [f"computing marks {killed}"]
    assert not killed.exists() and other.exists()


def test_a_killed_runs_slurm_state_folder_is_removed_and_others_are_kept(tmp_path: Path) -> None:
    """Fails if remove_named stops sweeping the local Slurm's state folders (tests/integration/slurm_cluster.py)."""
    killed, other = tmp_path / "scaler-slurm-4242-abc", tmp_path / "scaler-slurm-4343-def"
    for directory in (killed, other):
        (directory / "ctld").mkdir(parents=True)
    assert remove_config_homes({4242}, tmp_path) == [f"Slurm state folder {killed}"]
    assert not killed.exists() and other.exists()


def test_a_process_holding_a_file_of_a_killed_runs_slurm_state_folder_is_killed(tmp_path: Path) -> None:
    """A slurmstepd outlives its slurmd, holding the state folder's log open: it goes with the folder. Fails if
    kill_holders looks at nothing (the process is left running)."""
    import subprocess
    import sys

    from tests.reaping import kill_holders, open_paths

    folder = tmp_path / "scaler-slurm-4242-abc"
    (folder / "log").mkdir(parents=True)
    log = folder / "log" / "slurmd.log"
    holder = subprocess.Popen([sys.executable, "-c", f"f = open({str(log)!r}, 'a'); import time; time.sleep(60)"])
    try:
        for _ in range(200):  # until it has the file open
            if str(log) in open_paths(holder.pid):
                break
            time.sleep(0.05)
        assert kill_holders(folder) == [f"process {holder.pid} holding {folder}"]
        assert holder.wait(timeout=10) == -signal.SIGKILL
    finally:
        holder.kill()
        holder.wait()
