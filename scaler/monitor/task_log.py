"""The dashboard's task log: every task the monitor feed reports, held up to a bound, and queried a page at a time.

Pure: the feed's task transitions in (each stamped by the scheduler with its wall time, its worker and the client
that submitted the task), answers out (`query`, `summary`); no clock, no I/O, no lock (the dashboard's shell holds
one around it). The log holds at most `max_tasks` tasks: past that the task that finished first goes first (a live
task only when every held task is live), and `dropped` counts them, so the page can say how many it no longer
shows. The feed itself bounds the transitions it publishes per interval; `feed_dropped` counts those it left out
(a task whose transitions were all left out is not in the log at all).

`parse_query` turns the `/api/tasks` parameters into a `TaskQuery`, or raises `QueryError` naming the parameter.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scaler.protocol import messages as m

#: Tasks held by default (`--task-log-max-size`): about 60 MB of Python objects (measured, CPython 3.11).
DEFAULT_MAX_TASKS = 100_000
LIVE_STATES = frozenset({"waiting", "queued", "dispatched", "canceling"})
FINAL_STATES = frozenset(
    {"success", "failed", "canceled", "workerDied", "noWorker", "timedOut", "processorDied", "outOfMemory"}
)
#: `state=` takes a state, or "live" / "finished" for all of either kind.
STATE_FILTERS = LIVE_STATES | FINAL_STATES | {"live", "finished"}
SORT_KEYS = ("submitted", "task", "client", "function", "state", "worker", "duration", "peak_memory")
MAX_PAGE = 1000
DEFAULT_PAGE = 50
MAX_TEXT = 200  #: longest search text or filter value
#: Clients whose submissions are counted by function; past it the first seen is forgotten.
CLIENTS_COUNTED = 1000
#: Running tasks listed per worker in `summary()` (a worker with more says how many more).
CURRENT_SHOWN = 3
#: Client and worker names decoded once and shared by their tasks' entries; the cache starts over past this.
NAMES_CACHED = 10_000


@dataclass(slots=True)
class TaskEntry:
    task_id: str  #: hex
    client: str
    function: str
    state: str
    worker: str = ""  #: the worker it was handed to or ran on ("" before that)
    submitted: float = 0.0  #: wall time of its first transition seen
    started: float = 0.0  #: wall time of its latest dispatch (0: never dispatched)
    ended: float = 0.0  #: wall time of its final state (0: live)
    run_seconds: float = 0.0  #: from its worker's result (0: it did not run, or not known)
    peak_memory_bytes: int = 0

    def duration(self, now: float) -> float | None:
        """Seconds it held its worker: the worker's figure when it finished with a result, else from its dispatch
        to its end (to `now`, the latest wall time seen, while it runs); None when never dispatched."""
        if self.run_seconds:
            return self.run_seconds
        if not self.started:
            return None
        return max(0.0, (self.ended or now) - self.started)

    def row(self, now: float) -> dict[str, Any]:
        return {
            "task": self.task_id,
            "client": self.client,
            "function": self.function,
            "state": self.state,
            "worker": self.worker,
            "submitted": self.submitted,
            "started": self.started or None,
            "ended": self.ended or None,
            "duration_seconds": self.duration(now),
            "peak_memory_bytes": self.peak_memory_bytes or None,
        }


@dataclass(frozen=True)
class TaskQuery:
    offset: int = 0
    limit: int = DEFAULT_PAGE
    sort: str = "submitted"
    order: str = "desc"
    q: str = ""  #: case-insensitive text found in any column
    state: str = ""
    client: str = ""
    worker: str = ""
    function: str = ""


class QueryError(ValueError):
    def __init__(self, parameter: str, why: str) -> None:
        super().__init__(f"{parameter}: {why}")
        self.parameter = parameter


def parse_query(params: Mapping[str, Sequence[str]]) -> TaskQuery:
    """`/api/tasks`'s query string (as `urllib.parse.parse_qs` gives it) as a TaskQuery; QueryError names the
    first parameter that is unknown, repeated or out of range."""
    values: dict[str, str] = {}
    for name, given in params.items():
        if name not in TaskQuery.__dataclass_fields__:
            raise QueryError(name, f"unknown parameter (known: {', '.join(TaskQuery.__dataclass_fields__)})")
        if len(given) != 1:
            raise QueryError(name, "given more than once")
        if len(given[0]) > MAX_TEXT:
            raise QueryError(name, f"longer than {MAX_TEXT} characters")
        values[name] = given[0]
    query = TaskQuery(
        offset=_integer(values, "offset", 0, 0, None),
        limit=_integer(values, "limit", DEFAULT_PAGE, 1, MAX_PAGE),
        **{name: values[name] for name in ("q", "client", "worker", "function") if name in values},
        sort=_choice(values, "sort", "submitted", SORT_KEYS),
        order=_choice(values, "order", "desc", ("asc", "desc")),
        state=_choice(values, "state", "", sorted(STATE_FILTERS)),
    )
    return query


def _integer(values: Mapping[str, str], name: str, default: int, low: int, high: int | None) -> int:
    text = values.get(name)
    if text is None:
        return default
    try:
        number = int(text)
    except ValueError:
        raise QueryError(name, f"not an integer: {text!r}") from None
    if number < low or (high is not None and number > high):
        raise QueryError(name, f"{number} is out of range ({low} to {high if high is not None else 'any'})")
    return number


def _choice(values: Mapping[str, str], name: str, default: str, allowed: Iterable[str]) -> str:
    text = values.get(name)
    if text is None or (text == "" and default == ""):
        return default
    choices = tuple(allowed)
    if text not in choices:
        raise QueryError(name, f"{text!r} is not one of {', '.join(choices)}")
    return text


class TaskTransitionLog:
    def __init__(self, max_tasks: int = DEFAULT_MAX_TASKS) -> None:
        if max_tasks < 1:
            raise ValueError(f"max_tasks must be at least 1, not {max_tasks}")
        self.max_tasks = max_tasks
        self.tasks: dict[bytes, TaskEntry] = {}  #: in the order first seen
        self.dropped = 0  #: tasks let go for the bound
        self.feed_dropped = 0  #: transitions the scheduler's feed left out
        self.latest_wall_time = 0.0
        self.version = 0  #: changes with every transition: an answer of an older version may be stale
        self._finished: collections.OrderedDict[bytes, None] = collections.OrderedDict()  #: in the order finished
        self._running_on: dict[str, dict[bytes, None]] = {}  #: worker -> its dispatched tasks, in dispatch order
        self._submitted: dict[str, collections.Counter[str]] = {}  #: client -> function -> tasks seen
        self._names: dict[bytes, str] = {}

    # ------------------------------------------------------------ input

    def on_transitions(self, message: m.TaskTransitions) -> None:
        self.feed_dropped += message.dropped
        for transition in message.transitions:
            self.on_transition(transition)

    def on_transition(self, transition: m.TaskTransition) -> None:
        self.version += 1
        self.latest_wall_time = max(self.latest_wall_time, transition.wall_time)
        entry = self.tasks.get(transition.task_id)
        if entry is None:
            entry = self._add(transition)
        self._leave_worker(transition.task_id, entry)
        entry.state = transition.state
        if transition.worker_id:
            entry.worker = self._name(transition.worker_id)
        if transition.state == "dispatched":
            entry.started, entry.ended = transition.wall_time, 0.0
            self._running_on.setdefault(entry.worker, {})[transition.task_id] = None
        elif transition.state in FINAL_STATES:
            entry.ended = max(transition.wall_time, entry.started)
            entry.run_seconds = transition.run_seconds
            entry.peak_memory_bytes = transition.peak_memory_bytes
            self._finished[transition.task_id] = None
            self._finished.move_to_end(transition.task_id)

    def _add(self, transition: m.TaskTransition) -> TaskEntry:
        client = self._name(transition.client_id)
        entry = TaskEntry(transition.task_id.hex(), client, transition.function_name, transition.state)
        entry.submitted = transition.wall_time
        self.tasks[transition.task_id] = entry
        counted = self._submitted.get(client)
        if counted is None:
            if len(self._submitted) >= CLIENTS_COUNTED:
                del self._submitted[next(iter(self._submitted))]
            counted = self._submitted[client] = collections.Counter()
        counted[transition.function_name] += 1
        while len(self.tasks) > self.max_tasks:
            self._drop_one()
        return entry

    def _name(self, raw: bytes) -> str:
        """One string per client or worker id, however many tasks name it (a third of an entry's memory)."""
        name = self._names.get(raw)
        if name is None:
            if len(self._names) >= NAMES_CACHED:
                self._names.clear()
            name = self._names[raw] = raw.decode(errors="replace")
        return name

    def _drop_one(self) -> None:
        """The task that finished first goes; the first seen when none has finished."""
        task_id = self._finished.popitem(last=False)[0] if self._finished else next(iter(self.tasks))
        self._leave_worker(task_id, self.tasks.pop(task_id))
        self.dropped += 1

    def _leave_worker(self, task_id: bytes, entry: TaskEntry) -> None:
        running = self._running_on.get(entry.worker)
        if running is not None and task_id in running:
            del running[task_id]
            if not running:
                del self._running_on[entry.worker]

    # ------------------------------------------------------------ output

    def query(self, query: TaskQuery) -> dict[str, Any]:
        """One page of the tasks that match, sorted; `total` is how many match."""
        found = _TextSearch(query.q)
        matching = [entry for entry in self.tasks.values() if _matches(entry, query) and found(entry)]
        now = self.latest_wall_time
        if query.sort != "submitted":  # held in the order first seen already
            descending = query.order == "desc"
            matching.sort(key=_sort_key(query.sort, now, descending), reverse=descending)
        elif query.order == "desc":
            matching.reverse()
        page = matching[query.offset : query.offset + query.limit]
        return {
            "offset": query.offset,
            "limit": query.limit,
            "total": len(matching),
            "held": len(self.tasks),
            "max_tasks": self.max_tasks,
            "dropped": self.dropped,
            "feed_dropped": self.feed_dropped,
            "tasks": [entry.row(now) for entry in page],
        }

    def summary(self) -> dict[str, Any]:
        """What the live page shows beside the log: each worker's running tasks, what each client submitted."""
        current = {}
        for worker, running in self._running_on.items():
            entries = [self.tasks[task_id] for task_id in list(running)[:CURRENT_SHOWN]]
            current[worker] = {
                "tasks": [{"task": e.task_id, "function": e.function, "started": e.started} for e in entries],
                "more": max(0, len(running) - CURRENT_SHOWN),
            }
        return {
            "held": len(self.tasks),
            "max_tasks": self.max_tasks,
            "dropped": self.dropped,
            "feed_dropped": self.feed_dropped,
            "current": current,
            "submitted": {client: dict(counted.most_common()) for client, counted in self._submitted.items()},
        }


def _matches(entry: TaskEntry, query: TaskQuery) -> bool:
    if query.state == "live":
        if entry.state not in LIVE_STATES:
            return False
    elif query.state == "finished":
        if entry.state not in FINAL_STATES:
            return False
    elif query.state and entry.state != query.state:
        return False
    if query.client and entry.client != query.client:
        return False
    if query.worker and entry.worker != query.worker:
        return False
    return not query.function or entry.function == query.function


class _TextSearch:
    """Case-insensitive search of an entry's columns. Clients, functions, states and workers repeat across many
    tasks: each distinct value is lowered and searched once per query."""

    def __init__(self, text: str) -> None:
        self.text = text.lower()
        self._seen: dict[str, bool] = {}

    def _has(self, value: str) -> bool:
        found = self._seen.get(value)
        if found is None:
            found = self._seen[value] = self.text in value.lower()
        return found

    def __call__(self, entry: TaskEntry) -> bool:
        if not self.text or self.text in entry.task_id:  # ids are lower-case hex already
            return True
        return self._has(entry.client) or self._has(entry.function) or self._has(entry.state) or self._has(entry.worker)


def _sort_key(sort: str, now: float, descending: bool) -> Any:
    """A key that puts tasks without the value (never dispatched, not measured) last in either order."""
    missing_rank = 0 if descending else 1

    def measured(value: float | None) -> tuple[int, float]:
        return (missing_rank, 0.0) if value is None else (1 - missing_rank, value)

    if sort == "duration":
        return lambda entry: measured(entry.duration(now))
    if sort == "peak_memory":
        return lambda entry: measured(entry.peak_memory_bytes or None)
    field = {"task": "task_id"}.get(sort, sort)
    return lambda entry: getattr(entry, field)
