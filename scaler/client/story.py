"""A task's story as the client shows it: the scheduler's entries (with the processor's, which its worker
reported) merged with the client's own (submitted, answered), in time order, and what they leave out."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass

from scaler.protocol import messages as m


@dataclass(frozen=True)
class TaskStory:
    """`ScalerFuture.story()`: each entry has `wall_time` (seconds since the epoch), `component` (client, scheduler,
    processor), `where` (which one), `what` happened and its `cause`. `known` is False when the scheduler did not
    know the task (it forgot it, or never saw it): `note` then says why, and only the client's entries are there."""

    task_id: str
    entries: tuple[m.StoryEntry, ...]
    known: bool = True
    note: str = ""

    def __iter__(self) -> Iterator[m.StoryEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __str__(self) -> str:
        lines = [f"story of task {self.task_id}" + (f" ({self.note})" if self.note else "")]
        for entry in self.entries:
            at = datetime.datetime.fromtimestamp(entry.wall_time).strftime("%H:%M:%S.%f")[:-3]
            where = f"{entry.component} {entry.where}".strip()
            cause = f" <- {entry.cause}" if entry.cause else ""
            lines.append(f"{at}  {where:<50}  {entry.what}{cause}")
        return "\n".join(lines)


def merge_story(
    task_id: str, reply: m.TaskStoryReply | None, client_entries: list[m.StoryEntry], timeout: float
) -> TaskStory:
    """The scheduler's reply (None: it did not answer in time) with the client's own entries, in time order."""
    if reply is None:
        note = f"the scheduler did not answer within {timeout:g} s: only the client's entries are shown"
        return TaskStory(task_id, tuple(client_entries), False, note)
    entries = sorted((*reply.entries, *client_entries), key=lambda entry: entry.wall_time)
    return TaskStory(task_id, tuple(entries), reply.known, reply.note)
