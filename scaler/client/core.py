"""The client's pure core: what a client knows about its connection and its tasks, decided in one place.

No threads, no sockets, no clock (time comes in as `now`, monotonic seconds), no encoding (frames come in
encoded; messages go out as values). The shell around it (`client/agent.py`: the I/O thread and the methods the
user's thread calls) feeds it events under one lock and carries out the effects it returns, in order, outside
that lock (completing a future runs the user's callbacks).

Events in:
- from the user's side: `submit` (tasks with their futures and encoded frames), `submit_graph` (a graph's frame
  and its targets' futures), `cancel` (task ids), `cancel_not_sent` (a cancel that could not leave);
- from the I/O side: `start`, `on_messages`, `on_tick`, `on_disconnected` (each with `now`), and `on_closed`
  (the shell ended the connection: a disconnect, a send that failed, a refused handshake).

Effects out: `SendToScheduler` (a message to encode and send), `SendFrames` (encoded frames to send), `Complete`,
`ConfirmCancel`, `Fail` (futures to settle), `StreamValues` (values of streaming tasks, for their futures),
`Connected` (registered with a scheduler), `Closed` (the connection is over), `ShowLog`, `ShutdownAnswered`,
`StoryAnswered`, `Warn`, `RestoreStored` (what this client stored, stored again where object storage lost it).

Rules:
1. A task is *unfinished* from `submit` (or as a target of `submit_graph`) until its TaskResult or
   TaskCancelConfirm arrives, or the connection closes; each unfinished task's future is settled exactly once,
   by the core's effects (the future may also settle itself on the user's side: a cancel without a scheduler).
2. An unfinished task keeps its encoded frame, and an unfinished graph (one with a target unanswered) its frame:
   when a restarted scheduler registers the client again, they are sent again, tasks in submission order, then
   graphs, whole (their finished nodes run again). Before they go, the shell stores again what they need and object
   storage lost (`RestoreStored`: a scheduler's own storage restarts with it, empty).
3. A task whose cancel was asked and not answered is not sent again after a restart: the old instance may never
   have read the cancel, so its future is cancelled here (for a graph target: the whole graph, all its targets).
4. Once closed, the core stays closed: every unfinished future failed with the reason, nothing kept, and a
   submission raises that reason.
5. Tasks of a job submitted by another client are *followed* (`follow`): unfinished like the rest, but with no
   frame; after a scheduler restart (which forgets jobs) their futures fail with JobLostError.
6. Away and back (docs/protocol.md 5.15): the scheduler keeps this client's work while it is away (asleep, cut off,
   moved) for a resume window its HelloReply names; a link setting left to follow it (`follow_window`) waits that
   long for the scheduler instead (the grace after a closed connection only when the connection died of silence, this
   client away: a connection the scheduler closed as it went away waits the grace it has). Answers are counted
   (`answer_count.py`) and the count goes in heartbeats. When the connection closes, a ClientResume asks for what the
   dead connection may have taken; its ClientResumed names the tasks the scheduler never received, which are sent
   again (with the cancels asked for them), and the answers that follow it are counted anew. Registered again by the
   *same* scheduler (its instance unchanged: it dropped this client past the window), a ClientResume asks the same:
   the work the scheduler cancelled when it dropped this client fails with its reason (nothing of it runs again),
   what it never received (sent after the drop) is sent again. A closed connection whose replacement hears nothing
   from the scheduler for `RECONNECT_SECONDS` is made anew (and the ClientResume sent again on it): a secure
   scheduler does not read a second connection under this client's identity while it still holds the first.

The core is generic in the future type `F`: it stores futures and hands them back in effects, never calls them,
so the thread-based `Client` and an asyncio client can share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Generic, NamedTuple, TypeVar

from scaler.client.answer_count import AnswerCount
from scaler.errors import DisconnectedError, IncompatiblePeerError, JobLostError
from scaler.protocol import messages as m
from scaler.protocol.ids import GraphID, TaskID
from scaler.protocol.scheduler_link import (
    Forgotten,
    LinkEffect,
    LinkSettings,
    Lost,
    Registered,
    RegistrationRefused,
    SchedulerLink,
    SendHeartbeat,
    SendHello,
    StillWaiting,
)

F = TypeVar("F")

# ---------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class SendToScheduler:
    """A message for the scheduler: the shell encodes and sends it."""

    message: m.Message


class SendFrames(NamedTuple):
    """Encoded messages for the scheduler, to leave in this order. (A named tuple, not a frozen dataclass: one is
    made per submission, and a tuple is made in a third of the time.)"""

    frames: list[bytes]


@dataclass(frozen=True, slots=True)
class Complete(Generic[F]):
    """Tasks answered: hand each future its TaskResult. One effect for consecutive results (a batch of results
    costs one effect, not one per task)."""

    results: list[tuple[F, m.TaskResult]]


@dataclass(frozen=True, slots=True)
class StreamValues(Generic[F]):
    """Values streaming tasks yielded: hand each its future (a `streams.TaskStream`). One effect for consecutive
    values."""

    items: list[tuple[F, m.StreamItem]]


@dataclass(frozen=True, slots=True)
class ConfirmCancel(Generic[F]):
    """The task is cancelled: cancel its future."""

    future: F


@dataclass(frozen=True, slots=True)
class Fail(Generic[F]):
    futures: list[F]
    error: BaseException


@dataclass(frozen=True, slots=True)
class Connected:
    """Registered with a scheduler (the first time, or again after it restarted)."""

    reply: m.HelloReply


@dataclass(frozen=True, slots=True)
class Closed:
    """The connection is over (`error` says why): the shell stops its I/O."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class ShowLog:
    """Output a task streamed: print it."""

    log: m.TaskLog


@dataclass(frozen=True, slots=True)
class ShutdownAnswered:
    reply: m.ShutdownReply


@dataclass(frozen=True, slots=True)
class StoryAnswered:
    """The scheduler answered a request for a task's story."""

    reply: m.TaskStoryReply


@dataclass(frozen=True, slots=True)
class JobAnswered:
    """The scheduler answered a JobOpen or a JobAttach."""

    reply: m.JobReply | m.ActorReply  #: an ActorReply answers an ActorLookup the same way


@dataclass(frozen=True, slots=True)
class Warn:
    """Something the user should read in the log; `show`: on stderr too, at once (the user waits on it)."""

    text: str
    show: bool = False


@dataclass(frozen=True, slots=True)
class ReconnectToScheduler:
    """Close the connection to the scheduler and make a new one (rule 6)."""


@dataclass(frozen=True, slots=True)
class RestoreStored:
    """A restarted scheduler registered this client again, and its unfinished tasks go again next (rule 2): before
    they do, what this client stored and object storage lost (it restarts with a scheduler that started it) is stored
    again, from what the client still holds (its functions); what it does not hold any more is named."""


ClientEffect = (
    SendToScheduler
    | SendFrames
    | Complete[F]
    | StreamValues[F]
    | ConfirmCancel[F]
    | Fail[F]
    | Connected
    | Closed
    | ShowLog
    | ShutdownAnswered
    | StoryAnswered
    | JobAnswered
    | Warn
    | ReconnectToScheduler
    | RestoreStored
)

#: A connection that closed, and whose replacement has heard nothing from the scheduler for this long, is made anew
#: (rule 6): a secure scheduler (no ROUTER handover) never reads a new connection that named this client's identity
#: while the old one was still open there, as after a pause of the scheduler that outlasted ZeroMQ's heartbeats.
RECONNECT_SECONDS = 10.0


def _answer(
    reply: m.ShutdownReply | m.TaskStoryReply | m.JobReply | m.ActorReply,
) -> ShutdownAnswered | StoryAnswered | JobAnswered:
    if isinstance(reply, m.ShutdownReply):
        return ShutdownAnswered(reply)
    return StoryAnswered(reply) if isinstance(reply, m.TaskStoryReply) else JobAnswered(reply)


# ---------------------------------------------------------------- records


@dataclass(slots=True)
class _Graph:
    frame: bytes  #: the encoded GraphTask, sent again whole after a restart
    targets: set[TaskID] = field(default_factory=set)  #: targets not answered yet


class ClientCore(Generic[F]):
    def __init__(
        self, hello: m.Hello, link_settings: LinkSettings, follow_window: tuple[bool, bool] = (False, False)
    ) -> None:
        """`follow_window`: whether the link's silence timeout and its grace after a closed connection become the
        scheduler's resume window for this client, when that is longer (rule 6)."""
        self.link = SchedulerLink(link_settings)
        self._base_link = link_settings
        self._follow_window = follow_window
        self.answers = AnswerCount()  #: what the heartbeats acknowledge (rule 6)
        self._forgotten_reason = ""  #: why the scheduler last said it does not know this client
        #: why the scheduler dropped this client, when it registers it again (rule 6)
        self._dropped_reason = "the scheduler dropped this client"
        self._last_awake: float | None = None  #: the latest event this client handled
        #: since when a closed connection waits for the scheduler to answer again, or its latest reconnection (rule 6)
        self._unanswered_since: float | None = None
        self._hello = hello
        #: the latest accepting HelloReply; None before the first registration
        self.hello_reply: m.HelloReply | None = None
        self.worker_count = 0  #: as the scheduler last said
        self.error: BaseException | None = None  #: why the connection is over, once it is
        #: the unfinished tasks: each one's future, and its encoded Task frame (None for a graph's target, whose
        #: graph is sent again instead); in submission order
        self._unfinished: dict[TaskID, tuple[F, bytes | None]] = {}
        self._graphs: dict[GraphID, _Graph] = {}  #: the graphs with an unfinished target
        self._graph_of_target: dict[TaskID, GraphID] = {}  #: agrees with `_Graph.targets`
        #: unfinished tasks whose cancel was asked and not answered yet (rule 3)
        self._cancelling: set[TaskID] = set()
        #: unfinished tasks of jobs this client follows but did not submit (rule 5): no frame to send again
        self._followed: set[TaskID] = set()

    # ------------------------------------------------------------ queries

    def unfinished(self) -> dict[TaskID, F]:
        return {task_id: future for task_id, (future, _) in self._unfinished.items()}

    @property
    def unfinished_count(self) -> int:
        return len(self._unfinished)

    @property
    def kept_graph_count(self) -> int:
        """Graphs kept to be sent again after a restart (rule 2)."""
        return len(self._graphs)

    # ------------------------------------------------------------ events from the user's side

    def submit(self, tasks: Sequence[tuple[TaskID, F, bytes]]) -> list[ClientEffect[F]]:
        """Tasks to send, each with its future and its encoded Task; raises the reason once closed (rule 4)."""
        if self.error is not None:
            raise self.error
        unfinished, frames = self._unfinished, []
        for task_id, future, frame in tasks:
            unfinished[task_id] = (future, frame)
            frames.append(frame)
        return [SendFrames(frames)]

    def submit_graph(
        self, graph_id: GraphID, frame: bytes, targets: Sequence[tuple[TaskID, F]]
    ) -> list[ClientEffect[F]]:
        """A graph to send (its encoded GraphTask), with its targets' futures; raises the reason once closed."""
        if self.error is not None:
            raise self.error
        graph = self._graphs[graph_id] = _Graph(frame)
        for task_id, future in targets:
            self._unfinished[task_id] = (future, None)
            self._graph_of_target[task_id] = graph_id
            graph.targets.add(task_id)
        return [SendFrames([frame])]

    def follow(self, tasks: Sequence[tuple[TaskID, F]]) -> list[ClientEffect[F]]:
        """Futures for tasks of a job submitted elsewhere (rule 5); a task already unfinished here keeps its own."""
        if self.error is not None:
            raise self.error
        for task_id, future in tasks:
            if task_id not in self._unfinished:
                self._unfinished[task_id] = (future, None)
                self._followed.add(task_id)
        return []

    def cancel(self, task_ids: Sequence[TaskID], queued_only: bool = False) -> list[ClientEffect[F]]:
        """Ask the scheduler to cancel these tasks (a graph target cancels its graph, the scheduler's rule);
        `queued_only`: those not yet at a worker only (TaskCancel.queuedOnly), the others finish."""
        if not queued_only:  # a queued-only cancel an old instance missed is not repeated: its tasks simply run
            self._cancelling.update(task_id for task_id in task_ids if task_id in self._unfinished)
        return [SendToScheduler(m.TaskCancel(tuple(task_ids), queued_only))]

    def cancel_not_sent(self, task_ids: Sequence[TaskID], error: BaseException) -> list[ClientEffect[F]]:
        """The cancel of these tasks could not be sent: their futures fail with `error` and are forgotten."""
        futures = [future for task_id in task_ids if (future := self._answered(task_id)) is not None]
        return [Fail(futures, error)] if futures else []

    # ------------------------------------------------------------ events from the I/O side

    def start(self, now: float) -> list[ClientEffect[F]]:
        self._last_awake = now
        return self._follow(self.link.start(now))

    def on_messages(self, messages: Iterable[m.Message], now: float) -> list[ClientEffect[F]]:
        effects = self._noticed_own_pause(now)
        self._unanswered_since = None
        for message in messages:
            link_effects = self.link.on_message(message, now)
            if link_effects:
                effects += self._follow(link_effects)
            if isinstance(message, m.TaskResult):
                self.answers.answered()
                future = self._answered(message.task_id)
                if future is not None:
                    last = effects[-1] if effects else None
                    if isinstance(last, Complete):
                        last.results.append((future, message))
                    else:
                        effects.append(Complete([(future, message)]))
            elif isinstance(message, m.TaskCancelConfirm):
                self.answers.answered()
                future = self._answered(message.task_id)
                if future is not None:
                    effects.append(ConfirmCancel(future))
            elif isinstance(message, m.StreamItem):
                self._stream_value(message, effects)
            else:
                effects += self._on_other(message)
        return effects

    def _on_other(self, message: m.Message) -> list[ClientEffect[F]]:
        """A message that answers no task."""
        if isinstance(message, m.HeartbeatEcho):
            self.worker_count = message.worker_count
        elif isinstance(message, m.ClientResumed):
            return self._resumed(message)
        elif isinstance(message, m.TaskLog):
            return [ShowLog(message)]
        elif isinstance(message, (m.ShutdownReply, m.TaskStoryReply, m.JobReply, m.ActorReply)):  # answers
            return [_answer(message)]
        elif isinstance(message, m.ProtocolError) and message.kind is not m.ProtocolErrorKind.UNKNOWN_PEER:
            return [Warn(f"the scheduler refused a message of this client: {message.reason}")]
        return []

    def _stream_value(self, item: m.StreamItem, effects: list[ClientEffect[F]]) -> None:
        """A streaming task's value, for its future (with the values just before it, in one effect)."""
        unfinished = self._unfinished.get(item.task_id)
        if unfinished is None:
            return  # its stream ended, or was cancelled: nobody reads it
        last = effects[-1] if effects else None
        if isinstance(last, StreamValues):
            last.items.append((unfinished[0], item))
        else:
            effects.append(StreamValues([(unfinished[0], item)]))

    def on_tick(self, now: float) -> list[ClientEffect[F]]:
        return self._noticed_own_pause(now) + self._follow(self.link.on_tick(now)) + self._reconnect_if_unanswered(now)

    def _reconnect_if_unanswered(self, now: float) -> list[ClientEffect[F]]:
        """A closed connection still unanswered RECONNECT_SECONDS on is made anew, and the ClientResume, which the
        old one held, sent again on the new one (rule 6)."""
        since = self._unanswered_since
        if since is None or self.link.is_over or now - since < RECONNECT_SECONDS:
            return []
        self._unanswered_since = now
        return [ReconnectToScheduler(), SendToScheduler(self.answers.resume(list(self._unfinished)))]

    def _noticed_own_pause(self, now: float) -> list[ClientEffect[F]]:
        """A gap since the last event this client handled, longer than the link's `pause_after_seconds`, was this
        client's own pause: said in the log (rule 6)."""
        limit, last = self.link.settings.pause_after_seconds, self._last_awake
        self._last_awake = now
        if limit is None or last is None or now - last <= limit or not self.link.is_registered:
            return []
        text = (
            f"this client was paused for {now - last:.0f} s (its machine asleep, or its process stopped); the "
            "scheduler keeps its work for it while it is away"
        )
        return [Warn(text)]

    def on_disconnected(self, now: float) -> list[ClientEffect[F]]:
        """The connection closed: ask the scheduler, first thing on the next one, for what it took (rule 6)."""
        was_registered = self.link.is_registered
        effects = self._follow(self.link.on_disconnected(now))
        if was_registered and not self.link.is_over:
            effects.insert(0, SendToScheduler(self.answers.resume(list(self._unfinished))))
            if self._unanswered_since is None:
                self._unanswered_since = now
        return effects

    def on_closed(self, error: BaseException, quiet: bool = False) -> list[ClientEffect[F]]:
        """The connection is over: every unfinished future fails with `error` (rule 4); the first reason stays
        (and is warned about unless `quiet`)."""
        effects: list[ClientEffect[F]] = []
        if self.error is None:
            self.error = error
            if not quiet:
                effects.append(Warn(str(error)))
        pending = [future for future, _ in self._unfinished.values()]
        self._unfinished.clear()
        self._graphs.clear()
        self._graph_of_target.clear()
        self._cancelling.clear()
        self._followed.clear()
        if pending:
            effects.append(Fail(pending, error))
        effects.append(Closed(error))
        return effects

    # ------------------------------------------------------------ transitions

    def _follow(self, link_effects: list[LinkEffect]) -> list[ClientEffect[F]]:
        effects: list[ClientEffect[F]] = []
        for effect in link_effects:
            if isinstance(effect, SendHello):
                effects.append(SendToScheduler(replace(self._hello, known_instance=self.link.known_instance)))
            elif isinstance(effect, SendHeartbeat):
                effects.append(SendToScheduler(self.answers.heartbeat(effect.round_trip_seconds)))
            elif isinstance(effect, Registered):
                dropped = effect.again and self.hello_reply is not None and (
                    effect.reply.instance_id == self.hello_reply.instance_id != b""
                )  # fmt: skip
                self.hello_reply = effect.reply
                self.worker_count = effect.reply.worker_count
                self.answers.restart()
                self._wait_as_long_as_the_window(effect.reply.resume_seconds)
                if dropped:
                    effects += self._resume_dropped()
                elif effect.again:
                    effects += self._submit_again()
                effects.append(Connected(effect.reply))
            elif isinstance(effect, Forgotten):
                self._forgotten_reason = effect.reason
            elif isinstance(effect, RegistrationRefused):
                refusal: BaseException = (
                    ConnectionRefusedError(effect.reason)
                    if effect.authentication
                    else IncompatiblePeerError(effect.reason)
                )
                effects += self.on_closed(refusal)
            elif isinstance(effect, Lost):
                never_connected = not effect.was_registered
                effects += self.on_closed(ConnectionError(effect.reason) if never_connected
                                          else DisconnectedError(effect.reason))  # fmt: skip
            elif isinstance(effect, StillWaiting):  # shown once registered (start() shows its own before)
                effects.append(Warn(effect.text, show=self.hello_reply is not None))
        return effects

    def _answered(self, task_id: TaskID) -> F | None:
        """The task is answered (or given up): forget it; its future, if it was unfinished."""
        record = self._unfinished.pop(task_id, None)
        self._cancelling.discard(task_id)
        self._followed.discard(task_id)
        graph_id = self._graph_of_target.pop(task_id, None)
        if graph_id is not None:
            graph = self._graphs[graph_id]
            graph.targets.discard(task_id)
            if not graph.targets:
                del self._graphs[graph_id]
        return record[0] if record is not None else None

    def _submit_again(self) -> list[ClientEffect[F]]:
        """A restarted scheduler forgot this client: its unfinished tasks and graphs go again (rules 2 and 3)."""
        effects = self._cancel_what_was_being_cancelled() + self._fail_followed()
        frames = [frame for _, frame in self._unfinished.values() if frame is not None]
        graphs = [graph.frame for graph in self._graphs.values()]
        address = self.link.settings.address
        effects.append(
            Warn(
                f"the scheduler at {address} restarted and forgot this client: submitting its {len(frames)} "
                f"unfinished task(s) and {len(graphs)} graph(s) again"
            )
        )
        effects += [RestoreStored(), SendFrames(frames + graphs)]
        return effects

    def _wait_as_long_as_the_window(self, window: float) -> None:
        """The link waits for the scheduler as long as the scheduler keeps this client's work (rule 6), where its
        settings follow the window."""
        base, (timeout, grace) = self._base_link, self._follow_window
        settings = base
        if timeout and window > base.timeout_seconds:
            settings = replace(settings, timeout_seconds=window)
        if grace and base.lost_grace_seconds is not None and window > base.lost_grace_seconds:
            settings = replace(settings, away_grace_seconds=window)  # a scheduler that went away: not its window
        self.link.settings = settings

    def _resume_dropped(self) -> list[ClientEffect[F]]:
        """The same scheduler registered this client again: it had dropped it (away past its window, or silent without
        one). It is asked, as after a lost connection, what became of the unfinished work: what it cancelled then
        fails, what it never received is sent again (rule 6)."""
        self._dropped_reason = self._forgotten_reason or "it had dropped this client"
        address = self.link.settings.address
        warning = Warn(f"the scheduler at {address} dropped this client ({self._dropped_reason}); asking it what "
                       "became of the unfinished work")  # fmt: skip
        return [warning, SendToScheduler(self.answers.resume(list(self._unfinished)))]

    def _resumed(self, reply: m.ClientResumed) -> list[ClientEffect[F]]:
        """The answer to a ClientResume (rule 6): count anew; send again what the scheduler never received, and the
        cancels asked meanwhile (a cancel of a task it never had cancels the future here)."""
        self.answers.resumed(reply)
        unknown = set(reply.unknown)
        effects: list[ClientEffect[F]] = []
        if reply.cancelled:
            address = self.link.settings.address
            error = DisconnectedError(f"the scheduler at {address} dropped this client: {self._dropped_reason}")
            futures = [future for task_id in reply.cancelled if (future := self._answered(task_id)) is not None]
            effects.append(Fail(futures, error))
        frames: list[bytes] = []
        graphs: set[GraphID] = set()
        for task_id in reply.unknown:
            record = self._unfinished.get(task_id)
            if record is None or task_id in self._cancelling or task_id in self._followed:
                continue
            graph_id = self._graph_of_target.get(task_id)
            if graph_id is None and record[1] is not None:
                frames.append(record[1])
            elif graph_id is not None and graph_id not in graphs:
                graphs.add(graph_id)
                frames.append(self._graphs[graph_id].frame)
        cancels = [task_id for task_id in self._cancelling if task_id not in unknown]
        for task_id in [task_id for task_id in self._cancelling if task_id in unknown]:
            future = self._answered(task_id)
            if future is not None:
                effects.append(ConfirmCancel(future))
        if frames:
            effects.append(SendFrames(frames))
        if cancels:
            effects.append(SendToScheduler(m.TaskCancel(tuple(cancels))))
        address = self.link.settings.address
        effects.append(Warn(f"reconnected to the scheduler at {address}: {len(frames)} task(s) or graph(s) it had "
                            "not received sent again; the answers kept for this client follow"))  # fmt: skip
        return effects

    def _fail_followed(self) -> list[ClientEffect[F]]:
        """A restarted scheduler knows no job (it keeps no journal): the tasks followed here are lost (rule 5)."""
        futures = [future for task_id in list(self._followed) if (future := self._answered(task_id)) is not None]
        text = (
            "the scheduler restarted and forgot the job this task belongs to (jobs are kept in its memory only); "
            "its submitter, if still connected, submits the tasks again as ordinary tasks"
        )
        return [Fail(futures, JobLostError(text))] if futures else []

    def _cancel_what_was_being_cancelled(self) -> list[ClientEffect[F]]:
        """A cancel the old instance may never have read: the task (or the graph of a target) is not submitted
        again, and its future is cancelled here; a worker still running it is never heard from (rule 3)."""
        effects: list[ClientEffect[F]] = []
        for task_id in list(self._cancelling):
            graph_id = self._graph_of_target.get(task_id)
            doomed = [task_id] if graph_id is None else list(self._graphs[graph_id].targets)
            for doomed_id in doomed:
                future = self._answered(doomed_id)
                if future is not None:
                    effects.append(ConfirmCancel(future))
        return effects
