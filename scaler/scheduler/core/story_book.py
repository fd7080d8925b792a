"""Each task's story as the scheduler knows it: its transitions with their time, place and cause, kept bounded.

A live task's entries are kept until it ends (at most `ENTRIES_PER_TASK`; later ones are counted, and the
last entry always goes in: how it ended). A finished task's story is then kept among the latest
`retention_tasks` finished tasks and for `retention_seconds` (<= 0: no time bound), whichever bound is met
first; an older one is forgotten, and a request for it is answered with `known=False` and a note saying so.
`retention_tasks` 0 records no story at all. A live story is one flat list of a few values per entry (no record
per story nor per entry: a story is written for every task, read for few), made into entries when it is asked for.
A finished story is kept as a tuple of its plain values (no work for the collector: it untracks such tuples) until
the task table empties after a big queue: then the finished stories are pickled as one object (`freeze`), so that
the 10,000 kept do not hold the many small objects they were made of, which would pin the memory the drained queue's
tasks filled (an allocator gives memory back only where every object in it is freed). `cause_of` words why a
transition happens.

The scheduler records its own transitions (`note`), what a worker reported with a result (the processor's
start and end, `ran`: its stamps kept as a tuple, its entries made only when the story is read), and the waiting
reasons of the dispatch queue, sampled each status interval per queue key (`waiting`: a few spans per key, never a
walk of the queued tasks); a story is given the reasons whose span overlaps the times its task was queued when it is
asked for. Pure: times come in.
"""

from __future__ import annotations

import collections
import pickle
from collections.abc import Callable
from typing import Any

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID, short
from scaler.scheduler.core.task_state import TaskEvent, TaskState

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


#: A story is one flat list, no record per story nor per entry (a story is written for every task, read for few):
#: a header, then its entries, four slots each.
#: The header: its dispatch queue key (which waiting reasons are its own), its entries so far (what ENTRIES_PER_TASK
#: bounds), the entries left out, the monotonic time it ended (finished stories), its task id.
_Story = list[Any]
#: `_live_story`'s caller has not looked the task up in `_live`
_UNSEEN = object()
_KEY, _SIZE, _DROPPED, _ENDED_AT, _TASK_ID = range(5)
_HEADER = 5
#: A live story of one entry, its opening (queue key, wall time, what, cause): made from the task's record (`openings`,
#: a queued task has no story here until it moves), or kept as a tuple given to `opened`; its second entry makes it a
#: list.
_Seed = tuple[object, float, Any, Words]
#: The four slots of an entry, plain values only (what `freeze` packs): a scheduler transition (wall time,
#: what, where, cause), `what` a TaskState's value or text; or a processor's report of one run, kept as it came (its
#: RunStamps as a tuple, its result's status, the worker, the attempt * 4 plus how many of its entries fit under the
#: bound), made into entries when the story is read (`_entries_of`).
_SLOTS = 4


def _no_opening(task_id: TaskID) -> _Seed | None:
    return None


def _fresh(value: Any) -> Any:
    """`value` made anew, down to its floats, bytes and tuples (ints, strings and enums are shared or small)."""
    kind = type(value)
    if kind is float:
        return value + 0.0  # a new float object
    if kind is list:
        return [_fresh(item) for item in value]
    if kind is tuple:
        return tuple([_fresh(item) for item in value])
    if kind is bytes:
        return bytes(bytearray(value)) if len(value) > 1 else value
    return value


#: The plain value of each enum a story holds (a dict lookup: an enum's `.value` is a slow property).
_PLAIN: dict[object, str] = {state: state.value for state in TaskState} | {
    status: status.value for status in m.ResultStatus
}


_PROTOCOL = 5


def _plain(story: _Story) -> _Story:
    """The story with its scheduler entries' places and causes in words (for a cause holding a value pickle does not
    take, `freeze`)."""
    plain = story[:]
    for index in range(_HEADER, len(plain), _SLOTS):
        if type(plain[index]) is not tuple:  # a scheduler entry (a run's stamps are a tuple)
            plain[index + 2], plain[index + 3] = _words(plain[index + 2]), _words(plain[index + 3])
    return plain


def _new_story(task_id: TaskID, key: object = None) -> _Story:
    return [key, 0, 0, 0.0, task_id]


def _entries_of(story: _Story) -> tuple[list[_Entry], list[_Entry]]:
    """The scheduler's own entries in the order they were noted, and the processors' runs made into entries."""
    own: list[_Entry] = []
    runs: list[_Entry] = []
    for index in range(_HEADER, len(story), _SLOTS):
        first, what, where, cause = story[index : index + _SLOTS]
        if type(first) is not tuple:  # a scheduler entry (a run's stamps are a tuple)
            own.append((first, "scheduler", where, what, cause))
            continue
        started_at, finished_at, processor_pid, received_at = first
        placed = ("pid {} of worker {}", processor_pid, where)
        attempt = ("dispatch attempt {}", cause >> 2)
        made: list[_Entry] = []
        if received_at:
            made.append((received_at, "processor", placed, "received on its link", attempt))
        made.append((started_at, "processor", placed, "started", attempt))
        made.append((finished_at, "processor", placed, f"finished ({what})", attempt))
        runs += made[: cause & 3]
    return own, runs


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
        self._live: dict[TaskID, _Story | _Seed] = {}
        #: finished stories by task, each a tuple, and their tasks in the order they ended (oldest first)
        self._finished: dict[TaskID, tuple[Any, ...]] = {}
        self._ended: collections.deque[TaskID] = collections.deque()
        #: tasks whose id ended again while an older ending is still in `_ended`: how many such older endings (each
        #: passed over when its turn to go comes: the story kept is the latest)
        self._ended_again: dict[TaskID, int] = {}
        #: a live task's opening, (queue key, wall time, state, cause), when it has no story here yet: a task's story
        #: opens with its record (`TaskTable.opening_of`), so a queued task whose story has not moved has none here
        self.openings: Callable[[TaskID], _Seed | None] = _no_opening
        #: the finished stories, their order and `_ended_again`, pickled as one object while the scheduler is empty
        #: after a big drain (`freeze`); made back into the three when next needed (`_thaw`)
        self._frozen: bytes | None = None
        self._frozen_count = 0
        self._frozen_oldest_at = 0.0  #: the oldest frozen story's end (monotonic): `expire` thaws only for it
        self.forgotten = 0  #: finished stories dropped by the bounds so far
        #: queue key -> spans of waiting reasons, oldest first
        self._reasons: dict[object, collections.deque[_Span]] = {}

    def __len__(self) -> int:
        return len(self._live) + len(self._finished) + self._frozen_count

    def compact(self) -> None:
        """The task table emptied far below its peak (`task_table.py`, the shrink rule): the live stories are copied,
        each value made anew, and their table sized for what it holds. A story's values (its entries' times and
        causes, a run's stamps) were made one by one as its task moved, among a big queue's tasks; kept, they pin the
        memory those tasks filled. The finished ones go in one object once the table empties (`freeze`)."""
        self._live = {task_id: _fresh(story) for task_id, story in self._live.items()}

    def freeze(self) -> None:
        """The task table emptied after a big queue: the finished stories kept become one object until next needed.
        Each was made as its task ended, among the queue's memory, and once that memory is given back each of its
        values pins the memory around it, so a drain's memory would not settle (the Scale page's memory figures). One
        object of them all pins only its own."""
        if self._frozen is not None or not self._finished:
            return
        oldest = next((task_id for task_id in self._ended if task_id not in self._ended_again), None)
        self._frozen_oldest_at = self._ended_at(oldest) if oldest is not None else 0.0
        self._frozen_count = len(self._finished)
        try:
            self._frozen = pickle.dumps((self._finished, list(self._ended), self._ended_again), _PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):  # a cause holding a value pickle does not take
            plain = {task_id: tuple(_plain(list(story))) for task_id, story in self._finished.items()}
            self._frozen = pickle.dumps((plain, list(self._ended), self._ended_again), _PROTOCOL)
        self._finished, self._ended, self._ended_again = {}, collections.deque(), {}

    def _thaw(self) -> None:
        """The frozen stories made back into `_finished`, `_ended` and `_ended_again` (empty while frozen: whatever
        reads or changes them thaws first)."""
        frozen, self._frozen, self._frozen_count = self._frozen, None, 0
        if frozen is not None:
            finished, ended, self._ended_again = pickle.loads(frozen)  # only what `freeze` made
            self._finished, self._ended = finished, collections.deque(ended)

    def opened(self, task_id: TaskID, key: object, wall_time: float, what: str | TaskState, cause: Words) -> None:
        """A task reached the scheduler (submitted, or adopted after a restart), for a caller whose tasks do not open
        their stories themselves (`openings`)."""
        if self.enabled and task_id not in self._live:
            self._live[task_id] = (key, wall_time, _PLAIN.get(what, what), cause)

    def _live_story(self, task_id: TaskID, keep: bool = True, story: object = _UNSEEN) -> _Story | None:
        """A live task's story as a list (a seed, or its opening, grown into one; `keep`: kept as such). `story`: what
        `_live` holds for it (None: nothing), when the caller looked already."""
        if story is _UNSEEN:
            story = self._live.get(task_id)
        if story is None and self.enabled:
            story = self.openings(task_id)
        if type(story) is tuple:
            key, wall_time, what, cause = story
            story = [key, 1, 0, 0.0, task_id, wall_time, _PLAIN.get(what, what), "", cause]
            if keep:
                self._live[task_id] = story
        return story  # type: ignore[return-value]

    def note(
        self, task_id: TaskID, wall_time: float, what: str | TaskState, where: Words = "", cause: Words = ""
    ) -> None:
        story = self._live.get(task_id)  # the common case, a live task's story grown into a list, without a call
        if type(story) is not list:
            story = self._live_story(task_id, story=story)
        if story is None:
            if self._reopened(task_id):
                self.note(task_id, wall_time, what, where, cause)
                self._closed_again(task_id)
            return
        if story[_SIZE] < ENTRIES_PER_TASK:
            story += (wall_time, _PLAIN.get(what, what), where, cause)
            story[_SIZE] += 1
        else:
            story[_DROPPED] += 1

    def _reopened(self, task_id: TaskID) -> bool:
        """An entry about a task not live: its finished story is unpacked among the live ones for it (an actor's
        notes after its start task ended), or a new live one is opened; False when stories are off."""
        if not self.enabled:
            return False
        if self._frozen is not None:
            self._thaw()
        finished = self._finished.get(task_id)
        self._live[task_id] = _new_story(task_id) if finished is None else list(finished)
        return True

    def _closed_again(self, task_id: TaskID) -> None:
        """After `_reopened`: a finished story goes back among the finished ones."""
        if task_id in self._finished:
            self._finished[task_id] = tuple(self._live.pop(task_id))

    def ended(
        self, task_id: TaskID, now: float, wall_time: float, what: str, where: Words = "", cause: Words = ""
    ) -> None:
        """The task ended: its last entry goes in past the per-task bound, and its story joins the finished ones."""
        if not self.enabled:
            return
        if self._frozen is not None:
            self._thaw()
        story = self._live.get(task_id)  # as in `note`
        if type(story) is not list:
            story = self._live_story(task_id, story=story)
        if story is None:
            story = _new_story(task_id)
        else:
            del self._live[task_id]
        story += (wall_time, what, where, cause)
        story[_SIZE] += 1
        story[_ENDED_AT] = now
        finished = self._finished
        if task_id in finished:  # its id ended before: that ending is passed over when its turn to go comes
            self._ended_again[task_id] = self._ended_again.get(task_id, 0) + 1
        finished[task_id] = tuple(story)
        ended = self._ended
        ended.append(task_id)
        if len(ended) > self.retention_tasks:
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        """The latest `retention_tasks` endings are kept (a task that ended twice, its id submitted again, counts
        twice, its first story passed over): the deque stays bounded whatever the ids."""
        ended = self._ended
        while len(ended) > self.retention_tasks:
            self._forget(ended.popleft())

    def _forget(self, task_id: TaskID) -> None:
        """The oldest ending in `_ended`, just taken from it, goes: its story, unless its id ended again since."""
        again = self._ended_again.get(task_id)
        if again is None:
            del self._finished[task_id]
            self.forgotten += 1
        elif again > 1:
            self._ended_again[task_id] = again - 1
        else:
            del self._ended_again[task_id]

    def ran(self, task_id: TaskID, worker: bytes, attempt: int, result: m.TaskResult) -> None:
        """The processor's own times, reported with the result."""
        ran = result.ran
        if ran is None:
            return
        story = self._live.get(task_id)  # as in `note`
        if type(story) is not list:
            story = self._live_story(task_id, story=story)
        if story is None:
            if self._reopened(task_id):
                self.ran(task_id, worker, attempt, result)
                self._closed_again(task_id)
            return
        made = 3 if ran.received_at else 2  #: received (when known), started, finished
        size = story[_SIZE]
        fit = made if size + made <= ENTRIES_PER_TASK else max(0, ENTRIES_PER_TASK - size)
        if fit < made:
            story[_DROPPED] += made - fit
            if not fit:
                return
        stamps = (ran.started_at, ran.finished_at, ran.processor_pid, ran.received_at)
        # its entries are made when asked for; the status's plain value (`_value_`: no hash of the member, no property)
        story += (stamps, result.status._value_, worker, attempt << 2 | fit)
        story[_SIZE] = size + fit

    def expire(self, now: float) -> None:
        """Forget finished stories older than the retention time (called on ticks; <= 0: no time bound), and the
        waiting reasons of queue keys not sampled for as long."""
        if self.retention_seconds <= 0:
            return
        if self._reasons:
            newest = max(spans[-1].until for spans in self._reasons.values())  # wall clock, as the spans are
            self._reasons = {
                key: spans for key, spans in self._reasons.items() if newest - spans[-1].until <= self.retention_seconds
            }
        if self._frozen is not None:
            if now - self._frozen_oldest_at <= self.retention_seconds:
                return
            self._thaw()
        ended = self._ended
        while ended:
            task_id = ended[0]
            if task_id not in self._ended_again:  # its story is the current one: is it young enough to stay?
                if now - self._ended_at(task_id) <= self.retention_seconds:
                    return
            self._forget(ended.popleft())

    def _ended_at(self, task_id: TaskID) -> float:
        """When a kept finished story's task ended (monotonic)."""
        story = self._finished.get(task_id)
        return float(story[_ENDED_AT]) if story is not None else 0.0

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

    def _waits_of(self, key: object, own: list[_Entry]) -> list[_Entry]:
        """The waiting reasons of queue key `key` sampled while a task was queued (between its `queued` entry and the
        next of its own entries, `own` in the order noted), at most `ENTRIES_PER_TASK` of them."""
        spans = self._reasons.get(key)
        if not spans:
            return []
        waits: list[_Entry] = []
        for index, entry in enumerate(own):
            if entry[3] != "queued":
                continue
            start = entry[0]
            end = min((later[0] for later in own[index + 1 :]), default=float("inf"))
            for span in spans:
                if span.since <= end and span.until >= start and len(waits) < ENTRIES_PER_TASK:
                    waits.append((max(start, span.since), "scheduler", "", "waiting", span.reason))
        return waits

    def story(self, task_id: TaskID) -> m.TaskStoryReply:
        story = self._live_story(task_id, keep=False)
        if story is None and self._frozen is not None:
            self._thaw()
        if story is None and task_id in self._finished:
            story = list(self._finished[task_id])
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
        own, runs = _entries_of(story)
        everything = own + runs + self._waits_of(story[_KEY], own)
        entries = tuple(
            m.StoryEntry(at, component, self._place(component, where), what, _words(cause))
            for at, component, where, what, cause in sorted(everything, key=lambda entry: entry[0])
        )
        dropped = story[_DROPPED]
        note = f"{dropped} entries left out (at most {ENTRIES_PER_TASK} per task)" if dropped else ""
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
        # the status as text: a tuple of strings and bytes, kept with each finished story, is no work for the collector
        return ("result {} from worker {}", result.status._value_, worker)  # `_value_`: `value` is a Python property
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
