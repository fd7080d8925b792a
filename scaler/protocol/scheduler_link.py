"""The link every peer keeps with the scheduler, as a pure state machine (no clock, no socket).

Clients, workers and worker managers all register with a Hello, wait for the HelloReply, heartbeat, notice
when the scheduler stops answering, and register again when a restarted scheduler does not know them. This
module decides all of that once; each peer's shell feeds it events (`start`, `on_message`, `on_tick`,
`on_disconnected`, all stamped with `now` in monotonic seconds) and performs the effects it returns.

States:
- CONNECTING: a hello is out and unanswered; it is sent again with back-off, and a `StillWaiting` notice
  goes out every `notice_interval_seconds` so the user knows what the peer waits for.
- REGISTERED: the scheduler accepted the hello. Heartbeats go every `heartbeat_interval_seconds` (with
  `one_heartbeat_in_flight`, only once the previous one was echoed); with `follow_given_period` (workers), every
  period the scheduler gives, when longer (its HelloReply, then each HeartbeatEcho; 0: its own), and the silence
  that is a loss is at least three of those periods (heartbeat_period.py, rules 3 and 4). The round trip of the last
  echoed heartbeat is measured (`round_trip_seconds`) and reported in the next heartbeat.
- A closed connection (clients, `lost_on_disconnect`) is noticed at once: with a grace, a `StillWaiting` notice
  says so then and every `notice_interval_seconds` until a scheduler answers, or the grace ends in LOST. Which
  grace: a connection that closed while the scheduler talked was closed by a scheduler that went away (it stopped
  or crashed: `lost_grace_seconds`); one that closed after `away_silence_seconds` of silence died of that silence,
  this side asleep or cut off while the scheduler may keep its work (`away_grace_seconds`, when longer).
- REFUSED and LOST are final: the peer stops (a restarted scheduler that forgot the peer is not a loss for
  peers with `register_again`; it sends them back to CONNECTING).
Any message from the scheduler counts as a sign of life; silence longer than `timeout_seconds` is a loss. Only
the silence this peer was awake for counts: a peer that was itself frozen (a gap between its ticks longer than
`pause_after_seconds`) wakes with its timeouts moved on by the pause, because the scheduler's answers may be
waiting unread in its socket, and a scheduler that did go quiet is still found out a timeout later.

Surviving a scheduler restart (a grace period after the loss, a new instance told apart by an id in its
HelloReply) extends this machine: a state between REGISTERED and LOST that sends hellos with the same
back-off, and a `Registered` that says whether the instance changed. tests/unit/test_scheduler_link.py holds
the state x event table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from scaler.protocol import messages as m
from scaler.protocol.exit_codes import ExitCode
from scaler.protocol.heartbeat_period import obeyed_period, silence_timeout

__all__ = [  # ExitCode: what a Lost link ends a process with
    "ExitCode",
    "Forgotten",
    "LinkEffect",
    "LinkSettings",
    "LinkState",
    "Lost",
    "Registered",
    "RegistrationRefused",
    "SchedulerLink",
    "SendHeartbeat",
    "SendHello",
    "StillWaiting",
]


class LinkState(enum.Enum):
    CONNECTING = "connecting"
    REGISTERED = "registered"
    REFUSED = "refused"
    LOST = "lost"


@dataclass(frozen=True, slots=True)
class LinkSettings:
    address: str  #: the scheduler's address, for messages
    heartbeat_interval_seconds: float = 2.0
    timeout_seconds: float = 60.0  #: silence after which the scheduler counts as lost
    one_heartbeat_in_flight: bool = False  #: a new heartbeat only after the previous one's echo (clients)
    register_again: bool = True  #: a scheduler that forgot this peer gets a new hello (workers, managers)
    lost_on_disconnect: bool = False  #: a closed connection is a loss (clients): at once, or after the grace
    #: with `lost_on_disconnect`: how long a closed connection may stay without a word from a scheduler before it is
    #: a loss (a restarted scheduler at the same address answers within it); None: at once
    lost_grace_seconds: float | None = None
    #: with `lost_on_disconnect`: a connection that closes after this much silence from the scheduler died of it (this
    #: side away: its ZeroMQ heartbeats end it), and waits `away_grace_seconds` when that is longer
    away_silence_seconds: float = 5.0
    away_grace_seconds: float | None = None
    hello_retry_seconds: float = 2.0  #: first resend of an unanswered hello; doubles up to the maximum
    hello_retry_max_seconds: float = 30.0
    notice_interval_seconds: float = 10.0
    #: a gap between two events (ticks, messages) longer than this is this peer's own pause (SIGSTOP, a suspended
    #: VM or laptop, a blocked event loop), not the scheduler's silence: the excess is not counted against the
    #: scheduler. The shell sets it a few of its tick periods long; None: every gap counts
    pause_after_seconds: float | None = None
    #: the period the scheduler gives is obeyed when longer than `heartbeat_interval_seconds` (workers: the scheduler
    #: lengthens it as the cluster grows, heartbeat_period.py)
    follow_given_period: bool = False


# ---------------------------------------------------------------- effects


@dataclass(frozen=True, slots=True)
class SendHello:
    pass


@dataclass(frozen=True, slots=True)
class SendHeartbeat:
    round_trip_seconds: float  #: to put in the heartbeat


@dataclass(frozen=True, slots=True)
class Registered:
    reply: m.HelloReply
    again: bool  #: a registration after the scheduler had forgotten this peer


@dataclass(frozen=True, slots=True)
class Forgotten:
    """The scheduler does not know this peer any more (it restarted): what it gave the peer is void."""

    reason: str


#: How a scheduler's refusal for a key's rights begins (scaler.security.roles writes them).
AUTHENTICATION_PREFIX = "authentication:"


@dataclass(frozen=True, slots=True)
class RegistrationRefused:
    reason: str
    authentication: bool = False  #: refused for its key (a role it may not take, a revoked key), not for a mismatch


@dataclass(frozen=True, slots=True)
class Lost:
    reason: str
    was_registered: bool  #: False: the scheduler never accepted this peer (or not since it forgot it)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.SCHEDULER_LOST if self.was_registered else ExitCode.NEVER_CONNECTED


@dataclass(frozen=True, slots=True)
class StillWaiting:
    seconds: float
    text: str


LinkEffect = SendHello | SendHeartbeat | Registered | Forgotten | RegistrationRefused | Lost | StillWaiting


class SchedulerLink:
    def __init__(self, settings: LinkSettings) -> None:
        self.settings = settings
        self.state = LinkState.CONNECTING
        self.round_trip_seconds = 0.0  #: of the latest echoed heartbeat
        self.hello_reply: m.HelloReply | None = None  #: the latest accepting reply
        #: the period the scheduler gave last (with `follow_given_period`); 0: none
        self.given_period_seconds = 0.0
        self._last_heard = 0.0
        self._hello_sent_at = 0.0
        self._hello_retry = settings.hello_retry_seconds
        self._waiting_since = 0.0
        self._last_notice_at = 0.0
        self._last_heartbeat_at: float | None = None
        self._heartbeat_in_flight_since: float | None = None
        self._was_forgotten = False
        self._disconnected_at: float | None = None  #: a closed connection, within its grace
        self._grace = 0.0  #: the grace of the closed connection (`_disconnected_at`)
        self._last_awake: float | None = None  #: the latest event this peer handled (a tick, a message, the start)

    @property
    def heartbeat_interval_seconds(self) -> float:
        """The period this peer beats at: its own, or the one the scheduler gave when longer."""
        return obeyed_period(self.settings.heartbeat_interval_seconds, self.given_period_seconds)

    @property
    def timeout_seconds(self) -> float:
        """The silence that is a loss: the setting's, or three given periods when longer."""
        own = self.settings
        return silence_timeout(self.heartbeat_interval_seconds, own.timeout_seconds, own.heartbeat_interval_seconds)

    @property
    def is_registered(self) -> bool:
        return self.state is LinkState.REGISTERED

    @property
    def known_instance(self) -> bytes:
        """The scheduler instance this peer was last registered with (empty before the first registration): a
        hello carries it, so that a restarted scheduler knows the peer re-attaches."""
        return self.hello_reply.instance_id if self.hello_reply is not None else b""

    @property
    def is_over(self) -> bool:
        return self.state in (LinkState.REFUSED, LinkState.LOST)

    # ------------------------------------------------------------ events

    def start(self, now: float) -> list[LinkEffect]:
        self._last_heard = self._waiting_since = self._last_notice_at = self._last_awake = now
        return [self._hello(now)]

    def on_message(self, message: m.Message, now: float) -> list[LinkEffect]:
        if self.is_over:
            return []
        self._last_heard = self._last_awake = now
        self._disconnected_at = None
        if isinstance(message, m.HelloReply):
            return self._on_hello_reply(message, now)
        if isinstance(message, m.HeartbeatEcho):
            self._given(message.heartbeat_interval_seconds)  # 0: its own period again (the cluster shrank)
            if self._heartbeat_in_flight_since is not None:
                self.round_trip_seconds = max(0.0, now - self._heartbeat_in_flight_since)
                self._heartbeat_in_flight_since = None
        elif isinstance(message, m.ProtocolError) and message.kind is m.ProtocolErrorKind.UNKNOWN_PEER:
            return self._on_forgotten(message.reason, now)
        return []

    def on_tick(self, now: float) -> list[LinkEffect]:
        if self.is_over:
            return []
        self._forgive_own_pause(now)
        silent = now - self._last_heard
        grace = self._grace
        if self._disconnected_at is not None and now - self._disconnected_at > grace:
            return [self._lose(f"the connection to the scheduler at {self.settings.address} closed and no scheduler "
                               f"answered there within {grace:g} s (is it running? a scheduler restarted there "
                               "within the grace gets the unfinished tasks again)")]  # fmt: skip
        notice = self._reconnecting_notice(now)
        if silent > self.timeout_seconds:
            if self.is_registered:
                reason = f"the scheduler at {self.settings.address} has not answered for {silent:.0f} s"
            else:
                reason = f"no scheduler answered at {self.settings.address} within {self.timeout_seconds:g} s"
            return [self._lose(reason)]
        if self.state is LinkState.CONNECTING:
            return self._while_connecting(now)
        return notice + self._heartbeat_if_due(now)

    def on_disconnected(self, now: float) -> list[LinkEffect]:
        if self.is_over or not self.settings.lost_on_disconnect:
            return []
        if self.settings.lost_grace_seconds is None:
            return [self._lose(f"the connection to the scheduler at {self.settings.address} closed")]
        self._heartbeat_in_flight_since = None  # that heartbeat is gone: the next one goes to whoever answers next
        if self._disconnected_at is not None:
            return []
        self._disconnected_at = self._last_notice_at = now
        self._grace = self.settings.lost_grace_seconds
        away = self.settings.away_grace_seconds
        if away is not None and away > self._grace and now - self._last_heard >= self.settings.away_silence_seconds:
            self._grace = away  # this side was away: as long as the scheduler keeps its work
        text = (
            f"the connection to the scheduler at {self.settings.address} closed: waiting up to "
            f"{self._grace:g} s for a scheduler to answer there again"
        )
        return [StillWaiting(0.0, text)]

    def _reconnecting_notice(self, now: float) -> list[LinkEffect]:
        """While a closed connection waits out its grace, a notice every `notice_interval_seconds`."""
        since, grace = self._disconnected_at, self._grace
        if since is None or now - self._last_notice_at < self.settings.notice_interval_seconds:
            return []
        self._last_notice_at = now
        waited = now - since
        text = f"still no scheduler at {self.settings.address} ({waited:.0f} s; giving up in {grace - waited:.0f} s)"
        return [StillWaiting(waited, text)]

    def _forgive_own_pause(self, now: float) -> None:
        """Move the clocks of silence on by the part of the gap since the last event this peer handled that was its
        own pause (the part beyond `pause_after_seconds`, so that a loop that is merely slow still notices a loss)."""
        limit, last = self.settings.pause_after_seconds, self._last_awake
        self._last_awake = now
        if limit is None or last is None or now - last <= limit:
            return
        paused = now - last - limit
        self._last_heard += paused
        if self._disconnected_at is not None:
            self._disconnected_at += paused

    # ------------------------------------------------------------ transitions

    def _on_hello_reply(self, reply: m.HelloReply, now: float) -> list[LinkEffect]:
        if self.is_registered:
            return []  # the answer to a hello sent again while the first answer travelled
        if not reply.accepted:
            self.state = LinkState.REFUSED
            reason = f"the scheduler at {self.settings.address} refused this peer: {reply.reason}"
            return [RegistrationRefused(reason, authentication=reply.reason.startswith(AUTHENTICATION_PREFIX))]
        again = self._was_forgotten
        self.state, self.hello_reply, self._was_forgotten = LinkState.REGISTERED, reply, False
        self._hello_retry = self.settings.hello_retry_seconds
        self._heartbeat_in_flight_since = None
        self._last_heartbeat_at = None
        self._given(reply.heartbeat_interval_seconds)
        return [Registered(reply, again), *self._heartbeat_if_due(now)]

    def _given(self, period_seconds: float) -> None:
        """The scheduler gave this peer a heartbeat period: obeyed when longer than its own, with `follow_given_period`
        (heartbeat_period.py, rules 3 and 4)."""
        if self.settings.follow_given_period:
            self.given_period_seconds = period_seconds

    def _on_forgotten(self, reason: str, now: float) -> list[LinkEffect]:
        if not self.settings.register_again:
            return [self._lose(f"the scheduler at {self.settings.address} dropped this peer: {reason}")]
        if self.state is not LinkState.REGISTERED:
            return []  # our hello is on its way; the scheduler answered a message sent before it
        self.state, self._was_forgotten = LinkState.CONNECTING, True
        self._waiting_since = self._last_notice_at = now
        return [Forgotten(reason), self._hello(now)]

    def _while_connecting(self, now: float) -> list[LinkEffect]:
        effects: list[LinkEffect] = []
        if now - self._hello_sent_at >= self._hello_retry:
            self._hello_retry = min(self._hello_retry * 2, self.settings.hello_retry_max_seconds)
            effects.append(self._hello(now))
        if now - self._last_notice_at >= self.settings.notice_interval_seconds:
            self._last_notice_at = now
            waited = now - self._waiting_since
            left = self.timeout_seconds - (now - self._last_heard)
            address = self.settings.address
            text = f"still waiting for the scheduler at {address} ({waited:.0f} s; giving up in {left:.0f} s)"
            effects.append(StillWaiting(waited, text))
        return effects

    def _heartbeat_if_due(self, now: float) -> list[LinkEffect]:
        if self._last_heartbeat_at is not None and now - self._last_heartbeat_at < self.heartbeat_interval_seconds:
            return []
        if self.settings.one_heartbeat_in_flight and self._heartbeat_in_flight_since is not None:
            return []
        self._last_heartbeat_at = now
        if self._heartbeat_in_flight_since is None:
            self._heartbeat_in_flight_since = now
        return [SendHeartbeat(self.round_trip_seconds)]

    def _hello(self, now: float) -> SendHello:
        self._hello_sent_at = now
        return SendHello()

    def _lose(self, reason: str) -> Lost:
        was_registered = self.is_registered
        self.state = LinkState.LOST
        return Lost(reason, was_registered)
