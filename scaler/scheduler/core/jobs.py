"""Jobs: named sets of tasks that outlive the client that submitted them (docs/guide/sharing.md, "Jobs").

A job is opened by name (`JobOpen`, before its tasks) and owned by its submitter's CURVE key, or by nobody in
particular without CURVE. Its tasks are not cancelled when the submitter leaves; every answer (result or cancel
confirmation) is kept here and sent to each client that follows the job (the submitter, and every client that
attached by name). A job ends when its last task is answered; its answers are kept `retention_seconds` more,
then the job expires: its name is remembered as expired (so an attach says so) and `due` hands it back so the
core can free what its submitter stored. Pure: time comes in as `now`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.job_storage import Admitted, Answer, JobStorage

#: Expired names remembered so that an attach can say "expired" rather than "unknown"; beyond this the oldest go.
MAX_EXPIRED_NAMES = 10_000


@dataclass(slots=True)
class JobRecord:
    name: str
    owner: str  #: the submitter's CURVE key ("" without CURVE: anyone may attach)
    submitter: ClientID
    task_ids: tuple[TaskID, ...]  #: in submission order
    answers: dict[TaskID, Answer] = field(default_factory=dict)
    followers: set[PeerID] = field(default_factory=set)
    ended_at: float | None = None  #: when its last task was answered
    cancelled: bool = False
    opened_at: float = 0.0  #: when `JobOpen` reached the scheduler (the monitor shows the job's age)
    submitter_name: str = ""  #: the submitter's client name, kept for the monitor after it leaves
    failed: int = 0  #: answers that are not a success (a failure, a lost task, a cancel)
    quota_bytes: int = 0  #: the storage quota of its owner's jobs' results (0: none; job_storage.py)
    kept_bytes: int = 0  #: the bytes of results it keeps (given back to its owner's quota when it expires)

    @property
    def storage_owner(self) -> str:
        """Whose quota its results count against: its CURVE key, or its submitter without CURVE."""
        return self.owner or f"client:{bytes(self.submitter).hex()}"

    @property
    def state(self) -> str:
        if self.ended_at is None:
            return "running"
        return "cancelled" if self.cancelled else "done"


class JobTable:
    def __init__(self, retention_seconds: float, result_quota_bytes: int = 0) -> None:
        self.retention_seconds = retention_seconds
        self.storage = JobStorage(result_quota_bytes)
        self.jobs: dict[str, JobRecord] = {}
        self._job_of_task: dict[TaskID, str] = {}
        self._expired: dict[str, float] = {}  #: name -> when it expired, oldest first

    # ------------------------------------------------------------ from clients

    def open(
        self,
        name: str,
        owner: str,
        submitter: ClientID,
        task_ids: tuple[TaskID, ...],
        now: float = 0.0,
        submitter_name: str = "",
        key_quota_bytes: int = 0,
    ) -> str | None:
        """Open a job followed by its submitter; the reason it is refused, or None."""
        if not name:
            return "a job needs a name"
        if name in self.jobs:
            return f"the job name {name!r} is taken by a job still kept by the scheduler; choose another name"
        if not task_ids:
            return f"job {name!r} has no tasks"
        taken = [task_id for task_id in task_ids if task_id in self._job_of_task]
        if taken or len(set(task_ids)) != len(task_ids):
            return f"job {name!r} names a task twice or a task of another job"
        self.jobs[name] = JobRecord(
            name,
            owner,
            submitter,
            task_ids,
            followers={PeerID(submitter)},
            opened_at=now,
            submitter_name=submitter_name,
            quota_bytes=self.storage.quota_of(key_quota_bytes),
        )
        self._expired.pop(name, None)
        self._job_of_task.update((task_id, name) for task_id in task_ids)
        return None

    def find(self, name: str, owner: str) -> JobRecord | str:
        """The job a client of key `owner` may follow, or the reason it may not."""
        job = self.jobs.get(name)
        if job is None:
            if name in self._expired:
                return (
                    f"job {name!r} expired: its results were kept {self.retention_seconds:g} s after it ended "
                    f"(the scheduler's result_retention_seconds) and are gone"
                )
            return f"no job named {name!r} is known to this scheduler"
        if job.owner and job.owner != owner:
            return f"job {name!r} belongs to another key; only the key that submitted it may attach"
        return job

    def follow(self, job: JobRecord, peer: PeerID) -> list[Answer]:
        """`peer` follows the job from now on; the answers kept so far, in submission order."""
        job.followers.add(peer)
        return [job.answers[task_id] for task_id in job.task_ids if task_id in job.answers]

    def followed_by(self, peer: PeerID, task_ids: Iterable[TaskID]) -> dict[ClientID, list[TaskID]]:
        """Of these task ids, those of jobs `peer` follows, by the job's submitter (a cancel acts as it)."""
        by_submitter: dict[ClientID, list[TaskID]] = {}
        for task_id in task_ids:
            job = self.jobs.get(self._job_of_task.get(task_id, ""))
            if job is not None and peer in job.followers:
                by_submitter.setdefault(job.submitter, []).append(task_id)
        return by_submitter

    def peer_gone(self, peer: PeerID) -> None:
        for job in self.jobs.values():
            job.followers.discard(peer)

    # ------------------------------------------------------------ from the lifecycle and the clock

    def holds(self, task_id: TaskID) -> bool:
        return task_id in self._job_of_task

    def answered(self, task_id: TaskID, answer: Answer, now: float) -> tuple[Admitted, set[PeerID]]:
        """A job task's answer: kept, or refused in its storage quota (the refusal kept in its place); the followers
        to send it to."""
        job = self.jobs[self._job_of_task[task_id]]
        admitted = self.storage.admit(job.storage_owner, job.quota_bytes, job.name, answer)
        answer = admitted.answer
        job.kept_bytes += admitted.size
        if task_id not in job.answers and not _succeeded(answer):
            job.failed += 1
        job.answers[task_id] = answer
        if isinstance(answer, m.TaskCancelConfirm):
            job.cancelled = True
        if len(job.answers) == len(job.task_ids):
            job.ended_at = now
        return admitted, set(job.followers)

    def never_sent(self, submitter: ClientID, known: Callable[[TaskID], bool], now: float) -> list[TaskID]:
        """The submitter is gone: the tasks of its jobs that never reached the scheduler (not `known`, not answered)
        will never come; each is answered as not found, so that its job can end (and its name be freed in time)."""
        missing: list[TaskID] = []
        for job in [job for job in self.jobs.values() if job.submitter == submitter and job.ended_at is None]:
            for task_id in job.task_ids:
                if task_id not in job.answers and not known(task_id):
                    missing.append(task_id)
                    self.answered(task_id, m.TaskCancelConfirm(task_id, m.CancelOutcome.NOT_FOUND), now)
        return missing

    def has_live_jobs(self, submitter: ClientID) -> bool:
        """The submitter stored something a job still needs (its function, arguments, results)."""
        return any(job.submitter == submitter for job in self.jobs.values())

    def due(self, now: float) -> list[JobRecord]:
        """The jobs whose retention ended by `now`, removed (their names remembered as expired)."""
        gone = [
            job
            for job in self.jobs.values()
            if job.ended_at is not None and now >= job.ended_at + self.retention_seconds
        ]
        for job in gone:
            del self.jobs[job.name]
            self.storage.release(job.storage_owner, job.kept_bytes)
            for task_id in job.task_ids:
                self._job_of_task.pop(task_id, None)
            self._expired[job.name] = now
            if len(self._expired) > MAX_EXPIRED_NAMES:
                del self._expired[next(iter(self._expired))]
        return gone


def _succeeded(answer: Answer) -> bool:
    return isinstance(answer, m.TaskResult) and answer.status is m.ResultStatus.SUCCESS
