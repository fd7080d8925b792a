"""The storage quota of jobs' results (docs/guide/sharing.md, "Jobs"): the most bytes of results the jobs of one
owner keep at once, until they expire.

An owner is a CURVE key, or the submitting client without CURVE. Its quota is its key's `max_job_result_bytes`
in `sharing.toml`, else the scheduler's `--job-result-quota-bytes` (0: none). Every result a job keeps counts: one
kept in the scheduler (its inline payload) and one in object storage (its `stored_bytes`, written by the
processor). A result that would take the owner past its quota is refused: the followers get an error naming the
quota in its place, and its object in storage is deleted. A job's bytes are given back when it expires. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.protocol import messages as m
from scaler.protocol.ids import ObjectID

Answer = m.TaskResult | m.TaskCancelConfirm


@dataclass(frozen=True, slots=True)
class Admitted:
    answer: Answer  #: the answer to keep and send: the task's own, or the refusal in its place
    size: int  #: the bytes it holds (0 for a refusal)
    deleted: ObjectID | None = None  #: the refused result's object in storage, to delete


def result_size(answer: Answer) -> int:
    if not isinstance(answer, m.TaskResult):
        return 0
    if answer.payload_kind is m.PayloadKind.OBJECT_ID:
        return answer.stored_bytes
    return len(answer.payload)


class JobStorage:
    def __init__(self, default_quota_bytes: int) -> None:
        self.default_quota_bytes = default_quota_bytes
        self.held: dict[str, int] = {}  #: owner -> bytes of results its jobs keep

    def quota_of(self, key_quota_bytes: int) -> int:
        return key_quota_bytes or self.default_quota_bytes

    def admit(self, owner: str, quota_bytes: int, job_name: str, answer: Answer) -> Admitted:
        size = result_size(answer)
        held = self.held.get(owner, 0)
        if not quota_bytes or held + size <= quota_bytes:
            if size:
                self.held[owner] = held + size
            return Admitted(answer, size)
        assert isinstance(answer, m.TaskResult)  # a cancel confirmation holds nothing
        refusal = m.TaskResult(
            answer.task_id,
            m.ResultStatus.ERROR,
            error_message=(
                f"job {job_name!r}: its result ({size:,} bytes) was refused: the results its owner's jobs keep would "
                f"pass {quota_bytes:,} bytes, their storage quota (max_job_result_bytes in sharing.toml, or the "
                f"scheduler's --job-result-quota-bytes); {held:,} bytes are kept until those jobs expire"
            ),
            worker_id=answer.worker_id,
        )
        deleted = answer.payload if answer.payload_kind is m.PayloadKind.OBJECT_ID else None
        return Admitted(refusal, 0, None if deleted is None else ObjectID(deleted))

    def release(self, owner: str, size: int) -> None:
        left = self.held.get(owner, 0) - size
        if left > 0:
            self.held[owner] = left
        else:
            self.held.pop(owner, None)
