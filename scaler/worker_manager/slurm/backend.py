"""The Slurm backend: one unit = one batch job running one worker; the unit id is the job id.

- launch: `sbatch --parsable` of the manager's job script (`job_script.py`) on stdin, once per unit. Every job of
  the manager has the same name, `scaler-<manager id>`, so that `squeue --name` finds them (and `scancel --name`
  cancels them) and a restarted manager adopts them.
- list_units: `squeue --name <job name> --user <you> --states all` in its documented format (`formats.py`), at
  most every `slurm_poll_seconds` (and at once after a launch or a cancel): PENDING (and requeued, held) ->
  PENDING with Slurm's pending reason as the unit's wait; CONFIGURING (nodes booting) -> PENDING; RUNNING,
  SUSPENDED -> RUNNING; the end states -> GONE, named (`OUT_OF_MEMORY`, `NODE_FAIL`, `PREEMPTED`, `TIMEOUT` ...)
  with the end of the job's output when it failed. COMPLETING (its processes being stopped) is STOPPING for a job
  the manager cancelled; another one (cancelled from outside, preempted, failed) stays RUNNING while it completes,
  for COMPLETING_SECONDS at most, so that the reconciler names its end (squeue says it once it has ended) when it
  replaces it. squeue shows an ended job for the
  cluster's MinJobAge only; a job it no longer shows while it was alive at the previous listing is asked of sacct
  when Slurm keeps accounting, so that its end is named too.
- A running job within `lifetime_drain_seconds` of its time limit is listed with `reclaim_at` = its end: the
  manager launches its replacement at once and the scheduler drains its worker (the worker drains itself too: its
  lifetime ends before the limit, `job_worker.py`).
- terminate: `scancel` (SIGTERM: the worker leaves the scheduler, its tasks go back to the queue; Slurm sends
  SIGKILL KillWait seconds later); a cancelled job is listed STOPPING until it is gone. Unknown and ended jobs
  are a no-op (scancel answers 0 for them).
"""

from __future__ import annotations

import getpass
import logging
import time
from collections.abc import Callable
from pathlib import Path

from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState
from scaler.worker_manager.slurm.commands import SlurmCommands, SlurmError, words_of
from scaler.worker_manager.slurm.formats import (
    SACCT_FORMAT,
    SQUEUE_FORMAT,
    SlurmFormatError,
    SlurmJob,
    parse_sacct,
    parse_squeue,
    parse_submitted,
)
from scaler.worker_manager.slurm.job_script import JobRequest, job_script

logger = logging.getLogger(__name__)

#: Ended jobs whose output is quoted in their unit's detail (the others ended as asked, or were cancelled).
FAILED_STATES = frozenset({"FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "TIMEOUT", "DEADLINE"})
#: Lines of a failed job's output quoted.
OUTPUT_LINES = 3
#: How long a job the manager did not cancel may complete (its processes stopping) before it is listed STOPPING.
COMPLETING_SECONDS = 30.0


class SlurmBackend:
    def __init__(
        self,
        commands: SlurmCommands,
        request: JobRequest,
        drain_seconds: float,
        poll_seconds: float = 2.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`drain_seconds`: a running job this close to its time limit is listed as reclaimed (its worker drains)."""
        self._commands = commands
        self._request = request
        self._script = job_script(request)
        self._drain_seconds = drain_seconds
        self._poll_seconds = poll_seconds
        self._clock = clock
        self._user = getpass.getuser()
        self._listed: list[SlurmJob] | None = None  #: the latest squeue answer
        self._listed_at = 0.0
        self._cancelled: set[str] = set()  #: jobs scancel was asked for: never PENDING or RUNNING again
        self._just_cancelled: set[str] = set()  #: of those, the ones cancelled since the latest listing
        self._alive: set[str] = set()  #: jobs alive at the latest listing (to ask sacct about those it drops)
        self._ended: dict[str, SlurmJob] = {}  #: ended jobs squeue no longer shows, as sacct described them
        self._details: dict[str, str] = {}  #: an ended job's detail, read once
        self._completing: dict[str, float] = {}  #: jobs completing that the manager did not cancel: seen since
        self._accounting = commands.has_sacct  #: False once sacct said accounting is off

    @property
    def workers_per_unit(self) -> int:
        return 1

    @property
    def script(self) -> str:
        return self._script

    # ------------------------------------------------------------ the contract

    async def launch(self, count: int, spec: LaunchSpec) -> list[str]:
        launched: list[str] = []
        for _ in range(count):
            try:
                output = await self._commands.run("sbatch", "--parsable", stdin=self._script)
                launched.append(parse_submitted(output))
            except (SlurmError, SlurmFormatError):
                if launched:
                    break
                raise
            finally:
                self._listed = None  # the next listing asks squeue
        if launched:
            logger.info("submitted job(s) %s (%s)", ", ".join(launched), self._request.job_name)
        return launched

    async def list_units(self) -> list[UnitInfo]:
        now = self._clock()
        if self._listed is None or now - self._listed_at >= self._poll_seconds:
            self._listed = await self._squeue()
            self._listed_at = now
            shown = {job.job_id for job in self._listed}
            await self._ask_sacct(shown)
            kept = shown | self._ended.keys()  # what squeue and sacct no longer show is forgotten
            self._details = {job_id: detail for job_id, detail in self._details.items() if job_id in kept}
            self._completing = {job_id: at for job_id, at in self._completing.items() if job_id in kept}
            self._cancelled &= kept | self._just_cancelled
            self._just_cancelled = set()
        units = [self._unit(job, now) for job in self._listed]
        units += [self._unit(job, now) for job in self._ended.values()]
        return units

    async def terminate(self, unit_ids: list[str], reason: str) -> None:
        jobs = [unit_id for unit_id in unit_ids if unit_id.isdigit()]
        if not jobs:
            return
        await self._commands.run("scancel", *jobs)
        self._cancelled.update(jobs)
        self._just_cancelled.update(jobs)  # kept until a listing shows them (squeue may lag behind sbatch)
        self._listed = None

    async def close(self) -> None:
        return None

    # ------------------------------------------------------------ squeue and sacct

    async def _squeue(self) -> list[SlurmJob]:
        output = await self._commands.run(
            "squeue", "--noheader", f"--name={self._request.job_name}", f"--user={self._user}", "--states=all",
            f"--format={SQUEUE_FORMAT}",
        )  # fmt: skip
        return [job for job in parse_squeue(output) if job.name == self._request.job_name]

    async def _ask_sacct(self, shown: set[str]) -> None:
        """Jobs alive at the previous listing that squeue dropped (past MinJobAge, or a manager busy elsewhere): how
        they ended, from accounting when Slurm keeps it."""
        dropped = sorted(self._alive - shown)
        self._alive = {job.job_id for job in self._listed or () if job.unit_state is not UnitState.GONE}
        self._ended = {job_id: job for job_id, job in self._ended.items() if job_id not in shown}
        if not dropped or not self._accounting:
            return
        try:
            output = await self._commands.run(
                "sacct", "--parsable2", "--noheader", "--allocations", f"--jobs={','.join(dropped)}",
                f"--format={SACCT_FORMAT}",
            )  # fmt: skip
        except SlurmError as error:
            if "accounting storage is disabled" in str(error):
                self._accounting = False
            logger.debug("sacct: %s", error)
            return
        for job in parse_sacct(output):
            if job.job_id in dropped and job.unit_state is UnitState.GONE:
                self._ended[job.job_id] = job

    # ------------------------------------------------------------ units

    def _unit(self, job: SlurmJob, now: float) -> UnitInfo:
        state = job.unit_state
        if job.job_id in self._cancelled and state in (UnitState.PENDING, UnitState.RUNNING):
            state = UnitState.STOPPING
        elif state is UnitState.STOPPING and job.job_id not in self._cancelled:  # its end is named once it has ended
            since = self._completing.setdefault(job.job_id, now)
            state = UnitState.RUNNING if now - since < COMPLETING_SECONDS else UnitState.STOPPING
        created_at = job.submitted_at if job.submitted_at is not None else now
        if state is UnitState.GONE:
            self._cancelled.discard(job.job_id)
            self._completing.pop(job.job_id, None)
            return UnitInfo(job.job_id, state, created_at, detail=self._end_detail(job))
        reclaim_at = None
        limited = job.state == "RUNNING" and job.time_limit_seconds is not None and self._drain_seconds > 0
        if limited and job.ends_at is not None and now >= job.ends_at - self._drain_seconds:
            reclaim_at = job.ends_at  # its time limit comes: replaced now, its worker drained
        detail = f"job {job.job_id} {job.state.lower()}" + (f" on {job.where}" if state is UnitState.RUNNING else "")
        wait = job.wait if state is UnitState.PENDING else None
        return UnitInfo(job.job_id, state, created_at, detail=detail, reclaim_at=reclaim_at, wait=wait)

    def _end_detail(self, job: SlurmJob) -> str:
        detail = self._details.get(job.job_id)
        if detail is None:
            detail = job.describe_end()
            if job.state in FAILED_STATES:
                detail += self._output_tail(job.job_id)
            self._details[job.job_id] = detail
        return detail

    def _output_tail(self, job_id: str) -> str:
        path = Path(self._request.output_folder) / f"{job_id}.out"
        try:
            text = path.read_text(errors="replace")[-4096:]
        except OSError:
            return f"; its output {path} cannot be read"
        said = words_of(text, OUTPUT_LINES)
        return f"; the end of {path}: {said}" if said else f"; {path} is empty"
