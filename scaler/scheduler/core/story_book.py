"""Each task's story as the scheduler knows it: its transitions with their time, place and cause, kept bounded.

A live task's entries are kept until it ends (at most `ENTRIES_PER_TASK`; later ones are counted, and the
last entry always goes in: how it ended). A finished task's story is then kept among the latest
`retention_tasks` finished tasks and for `retention_seconds` (<= 0: no time bound), whichever bound is met
first; an older one is forgotten, and a request for it is answered with `known=False` and a note saying so.
`retention_tasks` 0 records no story at all. Entries are plain tuples (no record per entry): a story is
written for every task, read for few. `cause_of` words why a transition happens.

The scheduler records its own transitions (`note`), what a worker reported with a result (the processor's
start and end, `ran`: the report is kept as it came, its entries made only when the story is read), and the
waiting reasons of the dispatch queue, sampled each status interval per queue key (`waiting`: a few spans per key,
never a walk of the queued tasks); a story is given the reasons whose span overlaps the times its task was queued
when it is asked for. Pure: times come in.
"""

from __future__ import annotations

import collections

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID, short
from scaler.scheduler.core.task_state import TaskEvent

#: Entries kept per task (a task balanced back and forth, or retried, has a long story; this bounds it).
ENTRIES_PER_TASK = 64
#: Defaults of `--story-retention-tasks` and `--story-retention-seconds`.
DEFAULT_RETENTION_TASKS = 10_000
DEFAULT_RETENTION_SECONDS = 3600.0

#: A place or a cause as recorded: text, a peer id (bytes), or a template and its arguments; words are made only
#: when a story is asked for (`_words`), not for each of the many tasks whose story nobody reads.
Words = str | bytes | tuple[object, ...]
#: (wall time, component, where, what, cause)
_Entry = tuple[float, str, Words, str, Words]


#: Waiting-reason spans kept per queue key.
SPANS_PER_KEY = 32


class _Span:
    """A waiting reason of one queue key, sampled from `since` to `until` (wall clock)."""

    __slots__ = ("reason", "since", "until")

    def __init__(self, since: float, reason: str) -> None:
        self.since = self.until = since
        self.reason = reason


#: A processor's report of one run, kept as it came: (its stamps, the worker, the attempt, the result's status, how
#: many of its entries fit under the bound); its entries are made when the story is asked for (`_Story.all_entries`)
_Run = tuple[m.RunStamps, bytes, int, str, int]


class _Story:
    __slots__ = ("dropped", "ended_at", "entries", "key", "runs", "size")

    def __init__(self, key: object = None, entries: list[_Entry] | None = None) -> None:
        self.entries: list[_Entry] = entries if entries is not None else []
        self.dropped = 0
        self.ended_at = 0.0  #: monotonic time it ended (finished stories only)
        self.key = key  #: its dispatch queue key: which waiting reasons are its own
        self.runs: list[_Run] | None = None  #: the processors' reports (None: none yet)
        self.size = len(self.entries)  #: its entries, those of `runs` included (what ENTRIES_PER_TASK bounds)

    def all_entries(self) -> list[_Entry]:
        """Its entries, each run's expanded (in no particular order: a story is sorted by time when read)."""
        if not self.runs:
            return list(self.entries)
        entries = list(self.entries)
        for ran, worker, attempt, status, fit in self.runs:
            where = ("pid {} of worker {}", ran.processor_pid, worker)
            cause = ("dispatch attempt {}", attempt)
            made: list[_Entry] = []
            if ran.received_at:
                made.append((ran.received_at, "processor", where, "received from its worker agent", cause))
            made.append((ran.started_at, "processor", where, "started", cause))
            made.append((ran.finished_at, "processor", where, f"finished ({status})", cause))
            entries += made[:fit]
        return entries


class StoryBook:
    def __init__(
        self,
        retention_tasks: int = DEFAULT_RETENTION_TASKS,
        retention_seconds: float = DEFAULT_RETENTION_SECONDS,
        instance: str = "",
    ) -> None:
        """`instance`: this scheduler process's id, the place of its entries (a restart shows as a new one)."""
        self.instance = f"instance {instance}" if instance else ""
        self.retention_tasks = retention_tasks
        self.retention_seconds = retention_seconds
        #: 0 finished stories kept: no story is recorded at all (what `--story-retention-tasks 0` means)
        self.enabled = retention_tasks > 0
        self._live: dict[TaskID, _Story] = {}
        #: finished stories, oldest end first
        self._finished: collections.OrderedDict[TaskID, _Story] = collections.OrderedDict()
        self.forgotten = 0  #: finished stories dropped by the bounds so far
        #: queue key -> spans of waiting reasons, oldest first
        self._reasons: dict[object, collections.deque[_Span]] = {}

    def __len__(self) -> int:
        return len(self._live) + len(self._finished)

    def opened(self, task_id: TaskID, key: object, wall_time: float, what: str, cause: Words) -> None:
        """A task reached the scheduler (submitted, or adopted after a restart)."""
        if self.enabled and task_id not in self._live:
            self._live[task_id] = _Story(key, [(wall_time, "scheduler", "", what, cause)])

    def note(self, task_id: TaskID, wall_time: float, what: str, where: Words = "", cause: Words = "") -> None:
        story = self._live.get(task_id)  # the common case, inline: a live task's story with room
        if story is not None and story.size < ENTRIES_PER_TASK:
            story.entries.append((wall_time, "scheduler", where, what, cause))
            story.size += 1
            return
        self.add(task_id, (wall_time, "scheduler", where, what, cause))

    def add(self, task_id: TaskID, entry: _Entry) -> None:
        story = self._story_to_add_to(task_id)
        if story is None:
            return
        if story.size >= ENTRIES_PER_TASK:
            story.dropped += 1
            return
        story.entries.append(entry)
        story.size += 1

    def _story_to_add_to(self, task_id: TaskID) -> _Story | None:
        if not self.enabled:
            return None
        story = self._live.get(task_id)
        if story is None:
            story = self._finished.get(task_id)  # a late report (a result's stamps) of a task just ended
            if story is None:
                story = self._live[task_id] = _Story()
        return story

    def ended(
        self, task_id: TaskID, now: float, wall_time: float, what: str, where: Words = "", cause: Words = ""
    ) -> None:
        """The task ended: its last entry goes in past the per-task bound, and its story joins the finished ones."""
        if not self.enabled:
            return
        story = self._live.pop(task_id, None) or _Story()
        story.entries.append((wall_time, "scheduler", where, what, cause))
        story.size += 1
        story.ended_at = now
        self._finished[task_id] = story
        self._finished.move_to_end(task_id)
        while len(self._finished) > self.retention_tasks:
            self._finished.popitem(last=False)
            self.forgotten += 1

    def ran(self, task_id: TaskID, worker: bytes, attempt: int, result: m.TaskResult) -> None:
        """The processor's own times, reported with the result."""
        ran = result.ran
        if ran is None:
            return
        story = self._story_to_add_to(task_id)
        if story is None:
            return
        made = 3 if ran.received_at else 2  #: received (when known), started, finished
        fit = max(0, min(made, ENTRIES_PER_TASK - story.size))
        story.dropped += made - fit
        if not fit:
            return
        if story.runs is None:
            story.runs = []
        story.runs.append((ran, worker, attempt, result.status.value, fit))  # its entries are made when asked for
        story.size += fit

    def expire(self, now: float) -> None:
        """Forget finished stories older than the retention time (called on ticks; <= 0: no time bound), and the
        waiting reasons of queue keys not sampled for as long."""
        finished = self._finished
        if self.retention_seconds <= 0:
            return
        if self._reasons:
            newest = max(spans[-1].until for spans in self._reasons.values())  # wall clock, as the spans are
            self._reasons = {
                key: spans for key, spans in self._reasons.items() if newest - spans[-1].until <= self.retention_seconds
            }
        while finished:
            task_id, story = next(iter(finished.items()))
            if now - story.ended_at <= self.retention_seconds:
                return
            del finished[task_id]
            self.forgotten += 1

    def waiting(self, key: object, wall_time: float, reason: str) -> None:
        """At a status sample, tasks under queue key `key` wait for `reason`: its span grows, or a new one opens."""
        if not self.enabled:
            return
        spans = self._reasons.get(key)
        if spans is None:
            spans = self._reasons[key] = collections.deque(maxlen=SPANS_PER_KEY)
        if spans and spans[-1].reason == reason:
            spans[-1].until = wall_time
        else:
            spans.append(_Span(wall_time, reason))

    def _place(self, component: str, where: Words) -> str:
        """A scheduler entry happened at this instance, about the worker it names (if any)."""
        place = _words(where)
        if component != "scheduler":
            return place
        if place and self.instance:
            return f"{self.instance}, worker {place}"
        return f"worker {place}" if place else self.instance

    def _waits_of(self, story: _Story) -> list[_Entry]:
        """The waiting reasons sampled while this task was queued (between its `queued` entry and the next one), at
        most `ENTRIES_PER_TASK` of them."""
        spans = self._reasons.get(story.key)
        if not spans:
            return []
        waits: list[_Entry] = []
        entries = story.entries  # the scheduler's own, in the order they were noted (runs are the processors')
        for index, entry in enumerate(entries):
            if entry[3] != "queued" or entry[1] != "scheduler":
                continue
            start = entry[0]
            end = min((e[0] for e in entries[index + 1 :] if e[1] == "scheduler"), default=float("inf"))
            for span in spans:
                if span.since <= end and span.until >= start and len(waits) < ENTRIES_PER_TASK:
                    waits.append((max(start, span.since), "scheduler", "", "waiting", span.reason))
        return waits

    def story(self, task_id: TaskID) -> m.TaskStoryReply:
        story = self._live.get(task_id) or self._finished.get(task_id)
        if story is None:
            if not self.enabled:
                note = "stories are off on this scheduler (--story-retention-tasks 0)"
            else:
                note = (
                    "the scheduler does not know this task: it never reached this scheduler, or it finished and its"
                    f" story was forgotten (stories of finished tasks are kept for {self.retention_tasks} tasks and"
                    f" {self.retention_seconds:g} s; {self.forgotten} forgotten so far)"
                )
            return m.TaskStoryReply(task_id, False, (), note)
        everything = story.all_entries() + self._waits_of(story)
        entries = tuple(
            m.StoryEntry(at, component, self._place(component, where), what, _words(cause))
            for at, component, where, what, cause in sorted(everything, key=lambda entry: entry[0])
        )
        note = f"{story.dropped} entries left out (at most {ENTRIES_PER_TASK} per task)" if story.dropped else ""
        return m.TaskStoryReply(task_id, True, entries, note)


def cause_of(event: TaskEvent, client_gone: bool, worker: bytes, details: dict[str, object]) -> Words:
    """Why a transition happens, in words: the stimulus of a lifecycle event and its details."""
    reason = details.get("reason")
    if isinstance(reason, str) and reason:
        return reason
    result = details.get("result")
    if isinstance(result, m.TaskResult):
        said = f": {result.error_message[:200]}" if result.error_message else ""
        if said:
            return f"result {result.status.value} from worker {short(worker)}{said}"
        return ("result {} from worker {}", result.status.value, worker)
    if event is TaskEvent.CANCEL:
        return "its client left" if client_gone else "its client cancelled it"
    return _EVENT_CAUSES.get(event, str(event.value))


_EVENT_CAUSES: dict[TaskEvent, str] = {
    TaskEvent.CANCEL_CONFIRMED: "its worker confirmed the cancel",
    TaskEvent.DEPENDENCY_FAILED: "a task it depends on failed",
    TaskEvent.READY: "every task it depends on succeeded",
}


def _words(recorded: Words) -> str:
    """What was recorded, in words: a peer id in its short form, a template filled in."""
    if isinstance(recorded, str):
        return recorded
    if isinstance(recorded, bytes):
        return short(recorded)
    template, *arguments = recorded
    return str(template).format(*(_words(a) if isinstance(a, (str, bytes, tuple)) else a for a in arguments))
