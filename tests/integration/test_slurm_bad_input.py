"""What the Slurm manager refuses at start, against a real Slurm: exit code 2 and one line naming the setting and
Slurm's own words, never a traceback, nothing submitted; and the dry run, which prints the job script and submits
nothing. The checks run before the manager connects to any scheduler (the address given is never reached)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import BIN_DIR, COLD_START_SECONDS
from tests.integration.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("slurm"), pytest.mark.timeout(180)]


def manager(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run `scaler_worker_manager slurm` until it exits: (exit code, its log's ERROR lines, its whole output)."""
    manager_id = f"bad{uuid.uuid4().hex[:6]}"
    done = subprocess.run(
        [str(BIN_DIR / "scaler_worker_manager"), "slurm", "tcp://127.0.0.1:1", "-wmi", manager_id, *args],
        capture_output=True, text=True, timeout=COLD_START_SECONDS, env=env, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    errors = "\n".join(line for line in output.splitlines() if "[ERROR]" in line)
    return done.returncode, errors, output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--slurm-partition", "nosuch"), "slurm_partition 'nosuch': Slurm has no such partition (sinfo lists debug"),
        (("--slurm-time-limit", "1:2:3:4"), "slurm_time_limit: '1:2:3:4' is not a time in Slurm's format"),
        (("--slurm-partition", "limited", "--slurm-time-limit", "1:00:00"),
         "slurm_time_limit '1:00:00' is longer than partition limited's limit of 30 minute(s)"),
        (("--slurm-cpus-per-worker", "16"),
         "sbatch refuses the job script (check slurm_cpus_per_worker, slurm_memory_per_worker, slurm_gres): sbatch "
         "failed (exit 1): "),
        (("--slurm-extra-directives", "constraint=nosuch"),
         "sbatch refuses the job script (check slurm_extra_directives): sbatch failed (exit 1): "),
        (("--slurm-commands-folder", "/nonexistent"),
         "Slurm's commands sbatch, squeue, scancel, sinfo are not in slurm_commands_folder '/nonexistent'"),
        (("--slurm-memory-per-worker", "lots"), "slurm_memory_per_worker: 'lots' is not a memory size"),
        (("--slurm-time-limit", "1", "--lifetime-drain-seconds", "60"),
         "slurm_time_limit '1' (60 s) leaves the worker no time before it drains"),
        (("-wsa", "tcp://LOGIN_NODE:8516"),
         "worker_scheduler_address 'tcp://LOGIN_NODE:8516': the host 'LOGIN_NODE' is not known here"),
    ],
    ids=["partition", "time-format", "time-too-long", "too-many-cpus", "bad-directive", "no-commands", "memory",
         "no-time-to-work", "unknown-host"],
)  # fmt: skip
def test_a_setting_slurm_refuses_stops_the_manager_at_start(
    slurm_cluster: SlurmCluster, args: tuple[str, ...], words: str
) -> None:
    """Checked by switching the checks off: the manager starts, and its jobs wait or fail later."""
    code, errors, output = manager(*args)
    assert code == 2, output
    assert len(errors.splitlines()) == 1 and words in errors, output


def test_a_controller_that_does_not_answer_stops_the_manager_at_start(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        f"ClusterName=gone\nSlurmctldHost={slurm_cluster.node}(127.0.0.1)\nSlurmctldPort=9\n"
        f"AuthType=auth/none\nNodeName={slurm_cluster.node} CPUs=1\nPartitionName=debug Nodes=ALL Default=YES\n"
    )
    code, errors, output = manager(env={**slurm_cluster.environment, "SLURM_CONF": str(conf)})
    assert code == 2, output
    assert "the Slurm controller did not answer sinfo: sinfo failed (exit 1): " in errors, output
    assert "Unable to contact slurm controller" in errors


def test_the_dry_run_prints_the_job_script_and_submits_nothing(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    code, errors, output = manager(
        "--slurm-dry-run", "--slurm-time-limit", "30", "--slurm-cpus-per-worker", "2", "--slurm-memory-per-worker",
        "1G", "--slurm-job-prologue", "export OMP_NUM_THREADS=2", "--slurm-output-folder", str(tmp_path / "jobs"),
    )  # fmt: skip
    assert code == 0 and not errors, output
    lines = output.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "#SBATCH --cpus-per-task=2" in lines and "#SBATCH --time=30" in lines and "#SBATCH --mem=1G" in lines
    assert "#SBATCH --export=NONE" in lines and f"#SBATCH --output={tmp_path / 'jobs'}/%j.out" in lines
    assert "export OMP_NUM_THREADS=2" in lines
    assert lines[-1].startswith("# warning: the jobs' workers are told to reach the scheduler at tcp://127.0.0.1:1")
    assert any(line.startswith("exec ") and "scaler.worker_manager.slurm.job_worker" in line for line in lines)
    name = next(line for line in lines if line.startswith("#SBATCH --job-name=")).partition("=")[2]
    assert slurm_cluster.jobs(name, "all") == [], "nothing submitted"


def dry_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`scaler_worker_manager slurm --slurm-dry-run` as `> job.sh` runs it: its standard output and error apart."""
    return subprocess.run(
        [str(BIN_DIR / "scaler_worker_manager"), "slurm", "tcp://127.0.0.1:1", "--slurm-dry-run", *args],
        capture_output=True, text=True, timeout=COLD_START_SECONDS, env=env, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


def test_the_dry_run_shows_the_script_without_a_controller(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """issue 77, item 4: without a controller that answers (or without Slurm's commands: a laptop), the dry run
    still prints the script, and says on both outputs that the checks asking Slurm were skipped. Checked to fail
    before: exit 2, "the Slurm controller did not answer sinfo", and no script."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        f"ClusterName=gone\nSlurmctldHost={slurm_cluster.node}(127.0.0.1)\nSlurmctldPort=9\n"
        f"AuthType=auth/none\nNodeName={slurm_cluster.node} CPUs=1\nPartitionName=debug Nodes=ALL Default=YES\n"
    )
    for args, env, why in [
        ((), {**slurm_cluster.environment, "SLURM_CONF": str(conf)}, "the Slurm controller did not answer sinfo"),
        (("--slurm-commands-folder", str(tmp_path)), None, "Slurm's commands sbatch, squeue, scancel, sinfo are not"),
    ]:
        done = dry_run("--slurm-time-limit", "30", "--slurm-output-folder", str(tmp_path / "jobs"), *args, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == "#!/bin/bash" and "#SBATCH --time=30" in lines, done.stdout
        assert any(line.startswith("exec ") for line in lines), done.stdout
        skipped = next(line for line in lines if line.startswith("# not checked with Slurm"))
        assert why in skipped and "sbatch --test-only (account, QOS, resources) skipped" in skipped, skipped
        assert "Traceback" not in done.stderr and why in done.stderr, done.stderr


def test_the_dry_runs_refusal_goes_to_the_terminal_not_the_script(slurm_cluster: SlurmCluster) -> None:
    """issue 77, item 4: `--slurm-dry-run > job.sh` with a setting refused wrote the refusal into job.sh (the log
    is on standard output) and said nothing on the terminal. Checked to fail before: stdout held the [ERROR] line,
    stderr was empty."""
    done = dry_run("--slurm-memory-per-worker", "lots")
    assert done.returncode == 2 and done.stdout == "", done.stdout
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and "slurm_memory_per_worker: 'lots' is not a memory size" in said[0], done.stderr
