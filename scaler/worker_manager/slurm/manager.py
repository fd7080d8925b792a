"""`scaler_worker_manager slurm`: the shared runner around the Slurm backend, after what Slurm can answer at start.

Refused at start with exit code 2, in one line naming the setting and Slurm's own words: Slurm's commands not
found, a controller that does not answer, an unknown partition, a time limit Slurm cannot read or longer than the
partition allows (its jobs would wait forever on PartitionTimeLimit), one that leaves the worker no time before
its drain, an interpreter that does not exist, an output folder that cannot be made, and a job script sbatch
refuses (`sbatch --test-only`: an unknown account or QOS, more CPUs, memory or GPUs than the partition's nodes
have, a bad extra directive). `slurm_dry_run` prints the job script after those checks and exits 0, on standard
output alone (`> job.sh`), its refusals on standard error; without Slurm's commands or a controller that answers (a
laptop, a controller down) it prints the script all the same, the checks that need Slurm said to be skipped.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from scaler.config.manager_types import manager_type_of
from scaler.config.sections import SlurmWorkerManagerConfig, WorkerManagerSettings, section_to_json
from scaler.io.address import parse_address
from scaler.protocol.exit_codes import EXIT_CONFIGURATION, ExitCode
from scaler.worker_manager.backend import worker_config_of
from scaler.worker_manager.process import run_manager, settings_problem
from scaler.worker_manager.slurm.backend import SlurmBackend
from scaler.worker_manager.slurm.commands import SlurmCommands, SlurmError
from scaler.worker_manager.slurm.formats import (
    SINFO_FORMAT,
    Partition,
    SlurmFormatError,
    memory_problem,
    parse_sinfo,
    time_limit_seconds,
)
from scaler.worker_manager.slurm.job_script import JobRequest, job_name_of, job_script
from scaler.worker_manager.slurm.job_worker import LEAVE_BEFORE_LIMIT_SECONDS

logger = logging.getLogger(__name__)

#: What a manager id may hold, to name its jobs (sbatch reads `#SBATCH --job-name=` up to the line's end).
_JOB_NAME = re.compile(r"^[A-Za-z0-9._@+=:,-]+$")
#: sbatch's words -> the settings they are about (its refusals name the option's meaning, not our setting).
_REFUSALS = (
    ("account", "slurm_account"), ("qos", "slurm_qos"), ("partition", "slurm_partition"),
    ("--time", "slurm_time_limit"), ("time limit", "slurm_time_limit"), ("memory", "slurm_memory_per_worker"),
    ("gres", "slurm_gres"),
    ("generic resource", "slurm_gres"), ("feature", "slurm_extra_directives"),
    ("node configuration", "slurm_cpus_per_worker, slurm_memory_per_worker, slurm_gres"),
)  # fmt: skip


class StartProblem(Exception):
    """Why the manager cannot start, in one line."""


class SlurmUnreachable(StartProblem):
    """Slurm's commands are not there, or its controller does not answer: a dry run goes on without them."""


#: What a dry run without Slurm does not check (the checks that ask Slurm).
UNCHECKED = "the partition, the time limit against it, and sbatch --test-only (account, QOS, resources)"


@dataclass(frozen=True, slots=True)
class Prepared:
    commands: SlurmCommands | None  #: None: a dry run without Slurm (`unchecked` says why)
    request: JobRequest
    warnings: tuple[str, ...] = ()  #: logged when the manager runs; comments of the dry run's output
    unchecked: str | None = None  #: why a dry run did not ask Slurm


def run(config: WorkerManagerSettings) -> int:
    assert isinstance(config, SlurmWorkerManagerConfig)
    try:
        prepared = prepare(config)
    except StartProblem as problem:
        if config.slurm_dry_run:  # standard output is the script's (`> job.sh`): the refusal goes to the terminal
            print(f"scaler_worker_manager slurm: {problem}", file=sys.stderr, flush=True)
        else:
            logger.error("%s", problem)
        return EXIT_CONFIGURATION
    if config.slurm_dry_run:
        return _dry_run(prepared)
    assert prepared.commands is not None
    for warning in prepared.warnings:
        logger.warning("%s", warning)
    logger.info(
        "Slurm jobs named %s, their output in %s (slurm_dry_run prints their script)",
        prepared.request.job_name, prepared.request.output_folder,
    )  # fmt: skip
    # a running job is reclaimed (replaced now, its worker drained) when its worker starts draining
    drain = config.lifetime_drain_seconds + LEAVE_BEFORE_LIMIT_SECONDS if prepared.request.time_limit_seconds else 0.0
    backend = SlurmBackend(prepared.commands, prepared.request, drain, config.slurm_poll_seconds)
    return run_manager(config, backend)


def _dry_run(prepared: Prepared) -> int:
    """The script alone on standard output (`> job.sh`), what was checked and what it would warn of as comments;
    the checks skipped said on standard error too."""
    sys.stdout.write(job_script(prepared.request))
    if prepared.unchecked is None:
        sys.stdout.write(f"# checked with sbatch --test-only; nothing submitted ({prepared.request.job_name})\n")
    else:
        skipped = f"not checked with Slurm ({prepared.unchecked}): {UNCHECKED} skipped"
        sys.stdout.write(f"# {skipped}; nothing submitted ({prepared.request.job_name})\n")
        print(f"scaler_worker_manager slurm: {skipped}", file=sys.stderr, flush=True)
    sys.stdout.writelines(f"# warning: {warning}\n" for warning in prepared.warnings)
    sys.stdout.flush()
    return ExitCode.OK


def prepare(config: SlurmWorkerManagerConfig) -> Prepared:
    """Everything checked at start: the commands, the cluster, the job script; StartProblem naming what is wrong."""
    row = manager_type_of(config)
    problem = settings_problem(config, row.worker_type)
    if problem is not None:
        raise StartProblem(problem)
    if not _JOB_NAME.match(config.worker_manager_id):
        raise StartProblem(
            f"--worker-manager-id {config.worker_manager_id!r} names the manager's Slurm jobs (scaler-<id>): use "
            "letters, digits and . _ @ + = : , - only"
        )
    problem = memory_problem(config.slurm_memory_per_worker)
    if problem is not None:
        raise StartProblem(f"slurm_memory_per_worker: {problem}")
    try:
        given_limit = time_limit_seconds(config.slurm_time_limit) if config.slurm_time_limit.strip() else None
    except ValueError as error:
        raise StartProblem(f"slurm_time_limit: {error}") from None
    warnings = _workers_address_warnings(config.worker_scheduler_address or config.scheduler_address)
    commands: SlurmCommands | None = None
    partition: Partition | None = None
    unchecked: str | None = None
    try:
        commands = SlurmCommands.find(config.slurm_commands_folder)
        partition = _partition(commands, config.slurm_partition)
    except SlurmError as error:  # the commands are not there
        if not config.slurm_dry_run:
            raise StartProblem(str(error)) from None
        commands, unchecked = None, str(error)
    except SlurmUnreachable as error:
        if not config.slurm_dry_run:
            raise
        commands, unchecked = None, str(error)
    limit = _time_limit(config, partition, given_limit)
    request = JobRequest(
        job_name=job_name_of(config.worker_manager_id),
        output_folder=_output_folder(config),
        python=_python(config.slurm_worker_python),
        worker_json=section_to_json(worker_config_of(config, row.worker_type)),
        cpus=config.slurm_cpus_per_worker,
        partition=config.slurm_partition,
        account=config.slurm_account,
        qos=config.slurm_qos,
        time_limit=config.slurm_time_limit.strip(),
        time_limit_seconds=limit or 0,
        memory=config.slurm_memory_per_worker.strip(),
        gres=config.slurm_gres.strip(),
        extra_directives=config.slurm_extra_directives,
        prologue=config.slurm_job_prologue,
    )
    if commands is not None:
        _test_only(commands, request)
    return Prepared(commands, request, warnings, unchecked)


def _workers_address_warnings(address: str) -> tuple[str, ...]:
    """The host the jobs' workers are told to reach the scheduler at must be a name (or address) that resolves; a
    loopback one is reached from a compute node only if the node is this machine (said, not refused: a one-machine
    Slurm is a fine place to try it)."""
    host = parse_address(address).host
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError as error:
        raise StartProblem(
            f"worker_scheduler_address {address!r}: the host {host!r} is not known here ({error}): give the name the "
            "compute nodes reach this machine by (hostname -f)"
        ) from None
    if all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos):
        return (
            f"the jobs' workers are told to reach the scheduler at {address}, a loopback address: a compute node other "
            "than this machine cannot; give worker_scheduler_address this machine's name (hostname -f)",
        )
    return ()


def _partition(commands: SlurmCommands, name: str) -> Partition:
    try:
        partitions = parse_sinfo(commands.run_now("sinfo", "--noheader", "--Node", f"--format={SINFO_FORMAT}"))
    except SlurmError as error:
        raise SlurmUnreachable(f"the Slurm controller did not answer sinfo: {error}") from None
    except SlurmFormatError as error:
        raise StartProblem(str(error)) from None
    if name:
        if name not in partitions:
            known = ", ".join(sorted(partitions)) or "none"
            raise StartProblem(f"slurm_partition {name!r}: Slurm has no such partition (sinfo lists {known})")
        return partitions[name]
    default = [partition for partition in partitions.values() if partition.is_default]
    if not default:
        raise StartProblem(
            f"the cluster has no default partition: name one with slurm_partition ({', '.join(sorted(partitions))})"
        )
    return default[0]


def _time_limit(config: SlurmWorkerManagerConfig, partition: Partition | None, given: int | None) -> int | None:
    """The jobs' time limit in seconds (None: unlimited), checked against the partition's (when Slurm told it) and
    the drain."""
    max_time = partition.max_time_seconds if partition is not None else None
    if given is not None and max_time is not None and given > max_time:
        assert partition is not None
        raise StartProblem(
            f"slurm_time_limit {config.slurm_time_limit!r} is longer than partition {partition.name}'s limit of "
            f"{max_time // 60} minute(s): its jobs would wait forever (PartitionTimeLimit)"
        )
    limit = given if given is not None else (partition.job_time_seconds if partition is not None else None)
    if limit is not None and limit - LEAVE_BEFORE_LIMIT_SECONDS <= config.lifetime_drain_seconds:
        where = f"slurm_time_limit {config.slurm_time_limit!r}" if given is not None else "the partition's time limit"
        raise StartProblem(
            f"{where} ({limit} s) leaves the worker no time before it drains (lifetime_drain_seconds "
            f"{config.lifetime_drain_seconds:g}, and it leaves {LEAVE_BEFORE_LIMIT_SECONDS:g} s before the limit): "
            "give a longer slurm_time_limit or a shorter lifetime_drain_seconds"
        )
    return limit


def _output_folder(config: SlurmWorkerManagerConfig) -> str:
    folder = config.slurm_output_folder or f"~/.cache/scaler/slurm/{config.worker_manager_id}"
    path = Path(os.path.expanduser(folder)).absolute()
    try:
        path.mkdir(parents=True, exist_ok=True)  # Slurm does not make it: a job whose output folder is missing fails
    except OSError as error:
        raise StartProblem(f"slurm_output_folder {folder!r} cannot be made: {error}") from None
    return str(path)


def _python(python: str) -> str:
    if not python:
        return sys.executable
    path = os.path.expanduser(python)
    if not os.path.isabs(path) or not os.access(path, os.X_OK):
        raise StartProblem(
            f"slurm_worker_python {python!r} is not an executable file's absolute path (the jobs run it as it is)"
        )
    return path


def _test_only(commands: SlurmCommands, request: JobRequest) -> None:
    """Ask sbatch whether it takes the job script (nothing is submitted)."""
    try:
        commands.run_now("sbatch", "--test-only", stdin=job_script(request))
    except SlurmError as error:
        raise StartProblem(f"sbatch refuses the job script (check {settings_refused(str(error))}): {error}") from None


def settings_refused(words: str) -> str:
    """The settings sbatch's refusal is about, from its words (`Invalid qos specification` -> slurm_qos)."""
    said = words.lower()
    named = sorted({setting for clue, setting in _REFUSALS if clue in said})
    return " or ".join(named) if named else "the slurm_ settings (slurm_extra_directives included)"
