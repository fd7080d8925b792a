"""What Slurm's commands print, read from their documented machine formats, and Slurm's time format.

Pure: text in, values out (the backend runs the commands). The formats are the explicit field lists of
`squeue --noheader --format`, `sacct --parsable2 --noheader --format` and `sinfo --noheader --format`, with `|`
between fields (no field we ask for contains one), so that no free text is scraped; they are the same from Slurm
20.11 to 24.x, where `--json` is not built everywhere (its schema also changed between versions).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from scaler.worker_manager.backend import UnitState, UnitWait

#: squeue's fields: job id, state (long), reason, submit time, start time, end time, time limit, name, and the
#: reason or nodes as `%R` says them ("(ReqNodeNotAvail, UnavailableNodes:n1)" for a pending job)
SQUEUE_FORMAT = "%i|%T|%r|%V|%S|%e|%l|%j|%R"
#: sacct's fields (accounting runs): the job id, its state ("CANCELLED by 1000"), exit code, reason, start and end
SACCT_FORMAT = "JobIDRaw,State,ExitCode,Reason,Start,End"
#: sinfo's fields, one line per node and partition: partition ("debug*": the default), its availability, time
#: limit, default time, the node, its CPUs and memory (MB)
SINFO_FORMAT = "%P|%a|%l|%L|%N|%c|%m"

_STATES = {
    "PENDING": UnitState.PENDING, "REQUEUED": UnitState.PENDING, "REQUEUE_HOLD": UnitState.PENDING,
    "REQUEUE_FED": UnitState.PENDING, "RESV_DEL_HOLD": UnitState.PENDING, "CONFIGURING": UnitState.PENDING,
    "RUNNING": UnitState.RUNNING, "SUSPENDED": UnitState.RUNNING, "STOPPED": UnitState.RUNNING,
    "SIGNALING": UnitState.RUNNING, "RESIZING": UnitState.RUNNING,
    "COMPLETING": UnitState.STOPPING, "STAGE_OUT": UnitState.STOPPING,
}  # fmt: skip
#: The states a job ends in, as Slurm's documentation names them (squeue's JOB STATE CODES).
END_STATES = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
     "REVOKED", "SPECIAL_EXIT", "TIMEOUT"}
)  # fmt: skip

#: Pending reasons that say the job, as asked, does not start until its settings or the cluster's configuration
#: change (squeue's JOB REASON CODES); with "PerJob" limits of a QOS or an association (a job asking more CPUs,
#: nodes, memory or time than one job may have).
NEVER_STARTS_REASONS = frozenset(
    {"PartitionConfig", "PartitionTimeLimit", "BadConstraints", "DependencyNeverSatisfied", "InvalidAccount",
     "InvalidQOS"}
)  # fmt: skip
_PER_JOB_LIMIT = re.compile(r"^(QOS|Assoc)Max\w*PerJob\w*$")

#: What the common pending reasons mean (squeue's documentation, in short), said with the reason.
REASON_WORDS = {
    "Resources": "waiting for the nodes it asks for to be free",
    "Priority": "jobs of higher priority are ahead of it in the partition's queue",
    "PartitionConfig": "it asks more than the partition has or allows one job (CPUs, memory or nodes)",
    "PartitionTimeLimit": "its time limit is longer than the partition allows",
    "PartitionNodeLimit": "it asks more nodes than the partition allows, or nodes it needs are down or drained",
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",
    "ReqNodeNotAvail": "a node it needs is down, drained or reserved",
    "NodeDown": "a node it needs is down",
    "QOSMaxJobsPerUserLimit": "the QOS's limit on your running jobs is reached",
    "QOSMaxSubmitJobPerUserLimit": "the QOS's limit on your submitted jobs is reached",
    "AssocMaxJobsLimit": "the association's limit on running jobs is reached",
    "AssocGrpCpuLimit": "the association's CPUs in use are at their limit",
    "QOSGrpCpuLimit": "the QOS's CPUs in use are at their limit",
    "JobHeldUser": "a user holds it (scontrol release)",
    "JobHeldAdmin": "an administrator holds it",
    "BeginTime": "its earliest start time has not come",
    "Dependency": "it waits for another job",
    "Reservation": "it waits for its reservation",
    "Licenses": "it waits for a license",
    "BadConstraints": "its constraints (features) cannot be satisfied by any node",
    "InvalidAccount": "its account is invalid",
    "InvalidQOS": "its QOS is invalid",
    "None": "submitted; Slurm's scheduler has not looked at it yet",
}

_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_UNLIMITED = frozenset({"UNLIMITED", "INFINITE", "infinite", "unlimited", "Partition_Limit"})
_MEMORY = re.compile(r"^\d+[KMGT]?$", re.IGNORECASE)


class SlurmFormatError(ValueError):
    """A Slurm command printed what its documented format does not allow."""


# ---------------------------------------------------------------- times


def time_limit_seconds(text: str) -> int | None:
    """Seconds of a time in Slurm's format (`--time`, and what squeue and sinfo print): minutes, MM:SS, HH:MM:SS,
    D-HH, D-HH:MM, D-HH:MM:SS; None for unlimited. Raises ValueError naming the allowed forms."""
    text = text.strip()
    if text in _UNLIMITED:
        return None
    match = _TIME.match(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a time in Slurm's format: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"
        )
    days, first, second, third = (int(part) if part else None for part in match.groups())
    if days is not None:  # D-HH[:MM[:SS]]
        return ((days * 24 + (first or 0)) * 60 + (second or 0)) * 60 + (third or 0)
    if third is not None:  # HH:MM:SS
        return ((first or 0) * 60 + (second or 0)) * 60 + third
    if second is not None:  # MM:SS
        return (first or 0) * 60 + second
    return (first or 0) * 60  # minutes


def slurm_timestamp(text: str) -> float | None:
    """Wall-clock seconds of a time squeue or sacct prints (`2026-11-26T11:44:18`, the controller's local time);
    None for N/A, NONE, Unknown."""
    try:
        return datetime.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def memory_problem(text: str) -> str | None:
    """Why `text` is not a memory size in sbatch --mem's format, or None."""
    if not text or _MEMORY.match(text.strip()):
        return None
    return f"{text!r} is not a memory size in Slurm's format: a number with an optional unit K, M, G or T (4G, 500M)"


# ---------------------------------------------------------------- squeue, sacct


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job as squeue (or sacct) describes it."""

    job_id: str
    state: str  #: Slurm's long state name: PENDING, RUNNING, OUT_OF_MEMORY ...
    reason: str = ""  #: its pending reason, or why it ended; "None" when there is none
    submitted_at: float | None = None  #: wall-clock seconds
    started_at: float | None = None
    ends_at: float | None = None  #: a running job's expected end (start + time limit); None: no limit
    time_limit_seconds: int | None = None
    name: str = ""
    where: str = ""  #: squeue's %R: the nodes of a running job, a pending job's reason in Slurm's words
    exit_code: str = ""  #: sacct's "exit:signal"

    @property
    def unit_state(self) -> UnitState:
        return _STATES.get(self.state, UnitState.GONE)

    @property
    def wait(self) -> UnitWait | None:
        """Why it has not started, for a PENDING job (CONFIGURING is a boot, not a wait)."""
        if self.state not in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "RESV_DEL_HOLD"):
            return None
        reason = self.reason or "None"
        words = REASON_WORDS.get(reason, "")
        detail = self.where.strip().strip("()")
        if detail and detail != reason:  # "ReqNodeNotAvail, UnavailableNodes:n1": Slurm's own words say more
            words = f"{words} ({detail})" if words else detail
        return UnitWait(reason, words, never_starts=never_starts(reason))

    def describe_end(self) -> str:
        """`job 42 OUT_OF_MEMORY (exit 0:125)`-like words for a job that ended (the reconciler's unit detail)."""
        parts = [f"job {self.job_id} {self.state}"]
        if self.reason and self.reason != "None":
            parts.append(f"reason {self.reason}")
        if self.exit_code and self.exit_code != "0:0":
            parts.append(f"exit {self.exit_code}")
        return ", ".join(parts)


def never_starts(reason: str) -> bool:
    """Slurm's pending reason says the job does not start as asked (NEVER_STARTS_REASONS, "PerJob" limits)."""
    return reason in NEVER_STARTS_REASONS or _PER_JOB_LIMIT.match(reason) is not None


def parse_squeue(text: str) -> list[SlurmJob]:
    """The lines `squeue --noheader --format SQUEUE_FORMAT` printed."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) < 9:
            raise SlurmFormatError(f"squeue printed {line!r}, not the {len(fields)} fields of {SQUEUE_FORMAT!r}")
        job_id, state, reason, submitted, started, ends, limit, name = fields[:8]
        where = "|".join(fields[8:])
        try:
            limit_seconds = time_limit_seconds(limit)
        except ValueError:
            limit_seconds = None
        job = SlurmJob(
            job_id.strip(), state.strip(), reason.strip(), slurm_timestamp(submitted), slurm_timestamp(started),
            slurm_timestamp(ends), limit_seconds, name, where,
        )  # fmt: skip
        jobs.append(job)
    return jobs


def parse_sacct(text: str) -> list[SlurmJob]:
    """The lines `sacct --parsable2 --noheader --allocations --format SACCT_FORMAT` printed."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 6:
            raise SlurmFormatError(f"sacct printed {line!r}, not the fields of {SACCT_FORMAT!r}")
        job_id, state, exit_code, reason, started, ended = fields
        state = state.split()[0] if state.strip() else "UNKNOWN"  # "CANCELLED by 1000"
        jobs.append(
            SlurmJob(job_id, state, reason, None, slurm_timestamp(started), slurm_timestamp(ended), exit_code=exit_code)
        )
    return jobs


def parse_submitted(text: str) -> str:
    """The job id `sbatch --parsable` printed (`42`, or `42;cluster` on a federation)."""
    lines = [line for line in text.splitlines() if line.strip()]
    job_id = lines[-1].split(";")[0].strip() if lines else ""
    if not job_id.isdigit():
        raise SlurmFormatError(f"sbatch --parsable printed {text.strip()!r}, not a job id")
    return job_id


# ---------------------------------------------------------------- sinfo


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    is_default: bool
    is_up: bool
    max_time_seconds: int | None  #: None: unlimited
    default_time_seconds: int | None  #: None: the partition's max time
    nodes: tuple[str, ...]
    max_cpus: int  #: of its biggest node
    max_memory_mb: int

    @property
    def job_time_seconds(self) -> int | None:
        """The time limit of a job that gives none."""
        return self.default_time_seconds if self.default_time_seconds is not None else self.max_time_seconds


def parse_sinfo(text: str) -> dict[str, Partition]:
    """Partitions by name, from the lines `sinfo --noheader --Node --format SINFO_FORMAT` printed."""
    rows: dict[str, list[list[str]]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 7:
            raise SlurmFormatError(f"sinfo printed {line!r}, not the fields of {SINFO_FORMAT!r}")
        rows.setdefault(fields[0].strip(), []).append([field.strip() for field in fields])
    partitions = {}
    for shown, lines in rows.items():
        name = shown.rstrip("*")
        first = lines[0]
        default_time = None if first[3] in ("n/a", "NONE", "") else _time_or_none(first[3])
        partitions[name] = Partition(
            name, shown.endswith("*"), first[1] == "up", _time_or_none(first[2]), default_time,
            tuple(dict.fromkeys(line[4] for line in lines)), max(_number(line[5]) for line in lines),
            max(_number(line[6]) for line in lines),
        )  # fmt: skip
    return partitions


def _time_or_none(text: str) -> int | None:
    try:
        return time_limit_seconds(text)
    except ValueError:
        return None


def _number(text: str) -> int:
    digits = re.match(r"\d+", text)
    return int(digits.group()) if digits else 0
