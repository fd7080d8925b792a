"""The Slurm manager's pure parts: Slurm's time format, what squeue, sacct, sinfo and sbatch print in the documented
formats the backend asks for, the verdict on a pending job, and the job script."""

from __future__ import annotations

import datetime
import shlex

import pytest

from scaler.worker_manager.backend import UnitState, UnitWait
from scaler.worker_manager.slurm.formats import (
    SlurmFormatError,
    memory_problem,
    never_starts,
    parse_sacct,
    parse_sinfo,
    parse_squeue,
    parse_submitted,
    slurm_timestamp,
    time_limit_seconds,
)
from scaler.worker_manager.slurm.job_script import JOB_WORKER_MODULE, JobRequest, directives, job_name_of, job_script
from scaler.worker_manager.slurm.job_worker import LEAVE_BEFORE_LIMIT_SECONDS, lifetime_seconds
from scaler.worker_manager.slurm.manager import settings_refused


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 1800), ("1:30", 90), ("1:00:00", 3600), ("2-0", 2 * 86400), ("1-2", 86400 + 7200),
        ("1-2:30", 86400 + 7200 + 1800), ("1-02:30:15", 86400 + 7200 + 1800 + 15), ("0:45", 45), (" 5 ", 300),
        ("UNLIMITED", None), ("infinite", None),
    ],
)  # fmt: skip
def test_slurm_times_read_as_sbatch_reads_them(text: str, seconds: int | None) -> None:
    assert time_limit_seconds(text) == seconds


@pytest.mark.parametrize("text", ["1:2:3:4", "1h", "", "-1", "1-", "a-1"])
def test_a_time_slurm_cannot_read_is_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"):
        time_limit_seconds(text)


def test_timestamps_are_the_controllers_local_time_and_na_is_none() -> None:
    assert slurm_timestamp("2026-11-26T11:44:18") == datetime.datetime(2026, 11, 26, 11, 44, 18).timestamp()
    assert slurm_timestamp("N/A") is None and slurm_timestamp("NONE") is None and slurm_timestamp("Unknown") is None


def test_memory_sizes_in_sbatchs_format() -> None:
    assert memory_problem("") is None and memory_problem("4G") is None and memory_problem("500m") is None
    assert memory_problem("4000") is None
    assert memory_problem("4 GB") == (
        "'4 GB' is not a memory size in Slurm's format: a number with an optional unit K, M, G or T (4G, 500M)"
    )


SQUEUE = """\
12|PENDING|Resources|2026-11-26T11:44:18|N/A|N/A|1:00:00|scaler-m|(Resources)
13|PENDING|ReqNodeNotAvail|2026-11-26T11:44:19|N/A|N/A|1:00:00|scaler-m|(ReqNodeNotAvail, UnavailableNodes:n1)
14|PENDING|PartitionTimeLimit|2026-11-26T11:44:20|N/A|N/A|2:00:00|scaler-m|(PartitionTimeLimit)
15|RUNNING|None|2026-11-26T11:44:18|2026-11-26T11:44:19|2026-11-26T12:44:19|1:00:00|scaler-m|n1
16|OUT_OF_MEMORY|OutOfMemory|2026-11-26T11:40:00|2026-11-26T11:40:01|2026-11-26T11:42:00|1:00:00|scaler-m|n1
17|COMPLETING|None|2026-11-26T11:40:00|2026-11-26T11:40:01|2026-11-26T11:43:00|UNLIMITED|scaler-m|n1
18|CONFIGURING|None|2026-11-26T11:40:00|2026-11-26T11:40:01|2026-11-26T11:43:00|UNLIMITED|scaler-m|n1
"""


def test_squeue_lines_become_jobs_with_their_state_wait_and_times() -> None:
    jobs = {job.job_id: job for job in parse_squeue(SQUEUE)}
    assert [jobs[job_id].unit_state for job_id in sorted(jobs)] == [
        UnitState.PENDING, UnitState.PENDING, UnitState.PENDING, UnitState.RUNNING, UnitState.GONE,
        UnitState.STOPPING, UnitState.PENDING,
    ]  # fmt: skip
    assert jobs["12"].wait == UnitWait("Resources", "waiting for the nodes it asks for to be free")
    assert jobs["13"].wait == UnitWait(
        "ReqNodeNotAvail", "a node it needs is down, drained or reserved (ReqNodeNotAvail, UnavailableNodes:n1)"
    )
    assert jobs["14"].wait is not None and jobs["14"].wait.never_starts
    assert jobs["15"].wait is None and jobs["18"].wait is None  # running; nodes booting (no queue wait)
    assert jobs["15"].ends_at == datetime.datetime(2026, 11, 26, 12, 44, 19).timestamp()
    assert jobs["15"].time_limit_seconds == 3600 and jobs["17"].time_limit_seconds is None
    assert jobs["15"].where == "n1" and jobs["12"].name == "scaler-m"
    assert jobs["16"].describe_end() == "job 16 OUT_OF_MEMORY, reason OutOfMemory"


def test_squeue_output_outside_the_format_is_an_error() -> None:
    with pytest.raises(SlurmFormatError, match="not the 3 fields"):
        parse_squeue("12|PENDING|Resources\n")


@pytest.mark.parametrize(
    ("reason", "never"),
    [
        ("PartitionConfig", True), ("PartitionTimeLimit", True), ("BadConstraints", True), ("InvalidQOS", True),
        ("QOSMaxCpuPerJobLimit", True), ("AssocMaxWallDurationPerJobLimit", True), ("DependencyNeverSatisfied", True),
        ("Resources", False), ("Priority", False), ("QOSMaxJobsPerUserLimit", False), ("AssocGrpCpuLimit", False),
        ("PartitionNodeLimit", False), ("ReqNodeNotAvail", False), ("JobHeldUser", False), ("None", False),
    ],
)  # fmt: skip
def test_the_pending_reasons_that_mean_the_job_never_starts_as_asked(reason: str, never: bool) -> None:
    assert never_starts(reason) is never


def test_sacct_lines_name_how_a_job_ended() -> None:
    (cancelled, failed) = parse_sacct("20|CANCELLED by 0|0:15|None|2026-11-26T11:00:00|2026-11-26T11:05:00\n"
                                      "21|NODE_FAIL|1:0|None|2026-11-26T11:00:00|2026-11-26T11:06:00\n")  # fmt: skip
    assert (cancelled.state, cancelled.unit_state, cancelled.describe_end()) == (
        "CANCELLED",
        UnitState.GONE,
        "job 20 CANCELLED, exit 0:15",
    )
    assert failed.describe_end() == "job 21 NODE_FAIL, exit 1:0"


def test_sinfo_lines_give_each_partitions_limits_and_biggest_node() -> None:
    partitions = parse_sinfo(
        "debug*|up|infinite|n/a|n1|8|4000\ndebug*|up|infinite|n/a|n2|16|2000\nshort|up|30:00|10:00|n1|8|4000\n"
    )
    debug, short = partitions["debug"], partitions["short"]
    assert (debug.is_default, debug.is_up, debug.max_time_seconds, debug.job_time_seconds) == (True, True, None, None)
    assert (debug.nodes, debug.max_cpus, debug.max_memory_mb) == (("n1", "n2"), 16, 4000)
    assert (short.is_default, short.max_time_seconds, short.job_time_seconds) == (False, 1800, 600)


def test_sbatch_parsable_gives_the_job_id() -> None:
    assert parse_submitted("42\n") == "42" and parse_submitted("43;cluster2\n") == "43"
    with pytest.raises(SlurmFormatError):
        parse_submitted("sbatch: error: something\n")


# ---------------------------------------------------------------- the job script


REQUEST = JobRequest(
    job_name=job_name_of("slurm@login1"), output_folder="/home/me/.cache/scaler/slurm/slurm@login1/",
    python="/home/me/venv/bin/python", worker_json='{"preload": "mod:setup(\'x\')"}', cpus=4, partition="gpu",
    account="proj1", time_limit="2:00:00", time_limit_seconds=7200, memory="16G", gres="gpu:1",
    extra_directives=("#SBATCH --constraint=a100", "reservation=r1", "--partition=debug"),
    prologue="module load python/3.11\nsource ~/venvs/x/bin/activate\n",
)  # fmt: skip


def test_the_job_script_asks_for_what_the_settings_say_and_runs_the_worker() -> None:
    lines = job_script(REQUEST).splitlines()
    assert lines[0] == "#!/bin/bash"
    assert [line for line in lines if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=scaler-slurm@login1",
        "#SBATCH --output=/home/me/.cache/scaler/slurm/slurm@login1/%j.out",
        "#SBATCH --nodes=1", "#SBATCH --ntasks=1", "#SBATCH --cpus-per-task=4", "#SBATCH --export=NONE",
        "#SBATCH --no-requeue",
        "#SBATCH --partition=gpu", "#SBATCH --account=proj1", "#SBATCH --time=2:00:00", "#SBATCH --mem=16G",
        "#SBATCH --gres=gpu:1", "#SBATCH --constraint=a100", "#SBATCH --reservation=r1",
        "#SBATCH --partition=debug",  # the extra directives come last: sbatch takes the last of an option
    ]  # fmt: skip
    assert "module load python/3.11" in lines and "source ~/venvs/x/bin/activate" in lines
    (command,) = [line for line in lines if line.startswith("exec ")]
    assert shlex.split(command) == [
        "exec", "/home/me/venv/bin/python", "-m", JOB_WORKER_MODULE, '{"preload": "mod:setup(\'x\')"}', "7200"
    ]  # fmt: skip
    assert lines.index(command) > lines.index("source ~/venvs/x/bin/activate"), "the prologue runs first"


def test_a_job_without_optional_settings_asks_only_for_its_cpus() -> None:
    bare = JobRequest("scaler-m", "/out", "/usr/bin/python3", "{}")
    assert directives(bare) == [
        "--job-name=scaler-m", "--output=/out/%j.out", "--nodes=1", "--ntasks=1", "--cpus-per-task=1", "--export=NONE",
        "--no-requeue",
    ]  # fmt: skip
    assert job_script(bare).rstrip().endswith("scaler.worker_manager.slurm.job_worker '{}' 0")


def test_a_workers_lifetime_in_a_job_ends_before_its_time_limit() -> None:
    assert lifetime_seconds(3600, 0) == 3600 - LEAVE_BEFORE_LIMIT_SECONDS
    assert lifetime_seconds(3600, 600) == 600  # the worker's own, shorter
    assert lifetime_seconds(0, 0) == 0 and lifetime_seconds(0, 600) == 600  # no limit


@pytest.mark.parametrize(
    ("words", "settings"),
    [
        ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
         "slurm_account or slurm_partition"),
        ("sbatch: error: Batch job submission failed: Invalid qos specification", "slurm_qos"),
        ("sbatch: error: invalid partition specified: gpus", "slurm_partition"),
        ("sbatch: error: Invalid --time specification", "slurm_time_limit"),
        ("sbatch: error: Batch job submission failed: Requested node configuration is not available",
         "slurm_cpus_per_worker, slurm_memory_per_worker, slurm_gres"),
        ("sbatch: error: Invalid generic resource (gres) specification", "slurm_gres"),
        ("sbatch: error: Batch job submission failed: Invalid feature specification", "slurm_extra_directives"),
        ("sbatch: error: something new", "the slurm_ settings (slurm_extra_directives included)"),
    ],
)  # fmt: skip
def test_sbatchs_refusals_name_the_settings_they_are_about(words: str, settings: str) -> None:
    assert settings_refused(words) == settings
