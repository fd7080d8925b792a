"""The batch script of a Slurm worker job, from the manager's settings (pure: settings in, text out).

Every job of a manager is the same script: `#SBATCH` lines (the manager's, then `slurm_extra_directives`, which
sbatch reads after them, so they win), the prologue, then `exec` of the worker, so that the worker is the job's
batch process: Slurm's signals (scancel, the time limit) reach it and the job ends when it does. The worker learns
its unit (the job id, `$SLURM_JOB_ID`) and how long the job has left in the job (`job_worker.py`).

**The environment.** `--export=NONE`: a job starts from the user's login environment on the compute node (what
a job submitted from a fresh login gets), not from the manager's process. The manager's environment holds what
may be wrong on a compute node (a login node's scratch paths, proxies, a display), credentials its tasks should
not see, and the `SLURM_*` variables of a job the manager itself may run in. What the worker needs travels
explicitly: the interpreter by its absolute path, its settings as JSON on its command line, and what the user
writes in `slurm_job_prologue` (`module load`, activating an environment, exports). `slurm_extra_directives =
["--export=ALL"]` gives a job the manager's environment instead.

**No requeue.** `--no-requeue`: a job whose node fails ends NODE_FAIL and a preempted one ends PREEMPTED (also where
the partition's PreemptMode is REQUEUE), instead of Slurm putting it back in the queue. Requeued, a job would keep
its id but run a new worker, and wait meanwhile (Slurm holds a requeued job back two minutes, BeginTime, and while
its node is down): the manager would count it as capacity on its way while the work waits. Ended, the manager names
how it ended and submits a job of its own for the work that remains, which goes wherever Slurm has room.
`slurm_extra_directives = ["--requeue"]` asks Slurm to requeue them all the same.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

#: The module a job runs: its worker (`python -m scaler.worker_manager.slurm.job_worker '<settings>' <limit>`).
JOB_WORKER_MODULE = "scaler.worker_manager.slurm.job_worker"


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What each job of a manager asks Slurm for, and runs."""

    job_name: str  #: `scaler-<manager id>`: `squeue --name` finds the manager's jobs
    output_folder: str  #: each job writes `<folder>/<job id>.out`
    python: str  #: the interpreter of the worker, an absolute path
    worker_json: str  #: the worker's settings (`WorkerConfig` as JSON), its worker type the id prefix only
    cpus: int = 1
    partition: str = ""
    account: str = ""
    qos: str = ""
    time_limit: str = ""  #: as the user wrote it (Slurm's format), "" for the partition's
    time_limit_seconds: int = 0  #: the job's time limit in seconds (its partition's when none is given); 0: none
    memory: str = ""
    gres: str = ""
    extra_directives: tuple[str, ...] = ()
    prologue: str = ""


def job_name_of(manager_id: str) -> str:
    return f"scaler-{manager_id}"


def directives(request: JobRequest) -> list[str]:
    """The job's sbatch options, in the order of the script's `#SBATCH` lines."""
    options = [
        f"--job-name={request.job_name}",
        f"--output={request.output_folder.rstrip('/')}/%j.out",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={request.cpus}",
        "--export=NONE",
        "--no-requeue",
    ]
    named = (
        ("--partition", request.partition), ("--account", request.account), ("--qos", request.qos),
        ("--time", request.time_limit), ("--mem", request.memory), ("--gres", request.gres),
    )  # fmt: skip
    options += [f"{option}={value}" for option, value in named if value]
    options += [_option(line) for line in request.extra_directives if line.strip()]
    return options


def job_script(request: JobRequest) -> str:
    lines = ["#!/bin/bash", *(f"#SBATCH {option}" for option in directives(request))]
    prologue = request.prologue.strip("\n")
    if prologue.strip():
        lines += ["", "# slurm_job_prologue", prologue]
    command = [request.python, "-m", JOB_WORKER_MODULE, request.worker_json, str(request.time_limit_seconds)]
    lines += [
        "",
        "# the worker replaces this shell (exec): Slurm's signals reach it, and the job ends when it leaves",
        "exec " + " ".join(shlex.quote(part) for part in command),
        "",
    ]
    return "\n".join(lines)


def _option(line: str) -> str:
    """An extra directive as an option: `#SBATCH --constraint=x`, `--constraint=x` and `constraint=x` alike (the last
    is easier to give on a command line, where a value starting with -- reads as a flag)."""
    line = line.strip()
    line = line[len("#SBATCH") :].strip() if line.startswith("#SBATCH") else line
    return line if line.startswith("-") else f"--{line}"
