"""The scheduler link's pure state machine: every state against every event (start, reply, echo, forgotten,
other messages, tick before and after the timeout, disconnect), for the three kinds of peers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scaler.protocol import messages as m
from scaler.protocol.scheduler_link import (
    ExitCode,
    Forgotten,
    LinkSettings,
    LinkState,
    Lost,
    Registered,
    RegistrationRefused,
    SchedulerLink,
    SendHeartbeat,
    SendHello,
    StillWaiting,
)

ACCEPTED = m.HelloReply(True, object_storage_address="tcp://s:2")
REFUSED = m.HelloReply(False, "duplicate manager id")
FORGOTTEN = m.ProtocolError("unknown peer", m.ProtocolErrorKind.UNKNOWN_PEER)

WORKER = LinkSettings("tcp://s:1", heartbeat_interval_seconds=2.0, timeout_seconds=30.0)
CLIENT = LinkSettings(
    "tcp://s:1", 2.0, 30.0, one_heartbeat_in_flight=True, register_again=False, lost_on_disconnect=True
)


def kinds(effects: Sequence[object]) -> list[type]:
    return [type(effect) for effect in effects]


def registered(settings: LinkSettings = WORKER, now: float = 0.0) -> SchedulerLink:
    link = SchedulerLink(settings)
    link.start(now)
    link.on_message(ACCEPTED, now)
    return link


# ---------------------------------------------------------------- CONNECTING


def test_start_sends_a_hello_and_waits() -> None:
    link = SchedulerLink(WORKER)
    assert kinds(link.start(0.0)) == [SendHello]
    assert link.state is LinkState.CONNECTING


def test_an_accepting_reply_registers_and_the_first_heartbeat_goes_at_once() -> None:
    link = SchedulerLink(WORKER)
    link.start(0.0)
    effects = link.on_message(ACCEPTED, 1.0)
    assert kinds(effects) == [Registered, SendHeartbeat]
    assert link.is_registered and link.hello_reply == ACCEPTED


def test_a_refusal_is_final_and_says_why() -> None:
    link = SchedulerLink(WORKER)
    link.start(0.0)
    (refused,) = link.on_message(REFUSED, 1.0)
    assert isinstance(refused, RegistrationRefused) and "duplicate manager id" in refused.reason
    assert link.state is LinkState.REFUSED
    assert link.on_tick(100.0) == [] and link.on_message(ACCEPTED, 101.0) == []


def test_an_unanswered_hello_is_sent_again_with_back_off_and_the_wait_is_announced() -> None:
    link = SchedulerLink(WORKER)
    link.start(0.0)
    hellos = [now for now in range(1, 29) if SendHello in kinds(link.on_tick(float(now)))]
    assert hellos == [2, 6, 14]  # 2 s, then 4, then 8 (doubling)
    link = SchedulerLink(WORKER)
    link.start(0.0)
    notices = [e for now in range(1, 29) for e in link.on_tick(float(now)) if isinstance(e, StillWaiting)]
    assert [notice.seconds for notice in notices] == [10.0, 20.0]
    assert "still waiting for the scheduler at tcp://s:1 (10 s" in notices[0].text


def test_no_heartbeat_before_registration() -> None:
    link = SchedulerLink(WORKER)
    link.start(0.0)
    assert not [e for now in range(1, 10) for e in link.on_tick(float(now)) if isinstance(e, SendHeartbeat)]


def test_never_answered_is_lost_as_never_connected() -> None:
    link = SchedulerLink(WORKER)
    link.start(0.0)
    (lost,) = [e for e in link.on_tick(31.0) if isinstance(e, Lost)]
    assert not lost.was_registered and lost.exit_code is ExitCode.NEVER_CONNECTED
    assert "no scheduler answered at tcp://s:1 within 30 s" in lost.reason


def test_a_forgotten_notice_while_connecting_is_ignored() -> None:
    link = SchedulerLink(WORKER)
    link.start(0.0)
    assert link.on_message(FORGOTTEN, 0.1) == []
    assert link.state is LinkState.CONNECTING


# ---------------------------------------------------------------- REGISTERED


def test_heartbeats_follow_the_interval_and_carry_the_measured_round_trip() -> None:
    link = registered()  # heartbeat at 0.0
    link.on_message(m.HeartbeatEcho(), 0.125)
    assert link.on_tick(1.0) == []
    (heartbeat,) = link.on_tick(2.0)
    assert isinstance(heartbeat, SendHeartbeat) and heartbeat.round_trip_seconds == 0.125


def test_workers_heartbeat_without_echoes_clients_wait_for_the_echo() -> None:
    worker, client = registered(WORKER), registered(CLIENT)
    assert kinds(worker.on_tick(2.0)) == [SendHeartbeat]
    assert client.on_tick(2.0) == []  # the first one is still unanswered
    client.on_message(m.HeartbeatEcho(), 2.5)
    assert kinds(client.on_tick(3.0)) == [SendHeartbeat]


FOLLOWING = LinkSettings("tcp://s:1", heartbeat_interval_seconds=2.0, timeout_seconds=30.0, follow_given_period=True)


def beat_times(link: SchedulerLink, start: float, end: float, given: float, step: float = 0.5) -> list[float]:
    """When the link sends heartbeats between `start` and `end`, ticked every `step` and each beat echoed at once
    with the period `given`."""
    times, now = [], start
    while now <= end:
        if any(isinstance(effect, SendHeartbeat) for effect in link.on_tick(now)):
            times.append(now)
            link.on_message(m.HeartbeatEcho(heartbeat_interval_seconds=given), now)
        now += step
    return times


def test_a_worker_beats_at_the_period_its_scheduler_gives_and_waits_three_of_them() -> None:
    """heartbeat_period.py, rules 3 and 4: the period of the HelloReply, then of each echo; the
    silence that is a loss grows to three periods. Fails with the given period ignored (beats every 2 s)."""
    link = SchedulerLink(FOLLOWING)
    link.start(0.0)
    link.on_message(m.HelloReply(True, heartbeat_interval_seconds=5.0), 0.0)  # and a heartbeat at 0
    assert beat_times(link, 0.5, 20.0, 5.0) == [5.0, 10.0, 15.0, 20.0]
    link.on_message(m.HeartbeatEcho(heartbeat_interval_seconds=20.0), 20.0)
    assert link.heartbeat_interval_seconds == 20.0 and link.timeout_seconds == 60.0
    assert beat_times(link, 20.5, 80.0, 20.0) == [40.0, 60.0, 80.0]
    assert [type(e) for e in link.on_tick(80.0 + 60.0)] == [SendHeartbeat]  # silent 60 s: not yet lost
    assert kinds([e for e in link.on_tick(80.0 + 60.5) if isinstance(e, Lost)]) == [Lost]


def test_a_worker_told_0_beats_at_its_own_period_again() -> None:
    """The cluster shrank below the size where the scheduler lengthens the period: an echo's 0 means its own."""
    link = SchedulerLink(FOLLOWING)
    link.start(0.0)
    link.on_message(m.HelloReply(True, heartbeat_interval_seconds=10.0), 0.0)
    link.on_message(m.HeartbeatEcho(heartbeat_interval_seconds=0.0), 0.1)
    assert link.heartbeat_interval_seconds == 2.0 and link.timeout_seconds == 30.0


def test_a_given_period_shorter_than_its_own_or_none_leaves_a_worker_at_its_own() -> None:
    for given in (0.5, 0.0, float("nan"), -1.0):
        link = SchedulerLink(FOLLOWING)
        link.start(0.0)
        link.on_message(m.HelloReply(True, heartbeat_interval_seconds=given), 0.0)
        assert link.heartbeat_interval_seconds == 2.0 and link.timeout_seconds == 30.0, given
    huge = SchedulerLink(FOLLOWING)
    huge.start(0.0)
    huge.on_message(m.HelloReply(True, heartbeat_interval_seconds=1e9), 0.0)
    assert huge.heartbeat_interval_seconds == 600.0, "a scheduler's mistake cannot silence a worker for days"


def test_a_client_and_a_manager_keep_their_own_period() -> None:
    link = SchedulerLink(CLIENT)
    link.start(0.0)
    link.on_message(m.HelloReply(True, heartbeat_interval_seconds=50.0), 0.0)
    link.on_message(m.HeartbeatEcho(heartbeat_interval_seconds=50.0), 0.1)
    assert link.heartbeat_interval_seconds == 2.0 and link.timeout_seconds == 30.0


PAUSING = LinkSettings("tcp://s:1", heartbeat_interval_seconds=2.0, timeout_seconds=30.0, pause_after_seconds=1.0)


def ticks(link: SchedulerLink, start: float, end: float, step: float = 0.5) -> list[object]:
    """Tick every `step` seconds from `start` to `end` (an awake peer); return every effect."""
    effects: list[object] = []
    now = start
    while now <= end:
        effects += link.on_tick(now)
        now += step
    return effects


def test_the_peers_own_pause_does_not_count_as_the_schedulers_silence_but_a_silence_after_it_does() -> None:
    """A peer frozen for 100 s (no tick from 10 to 110) wakes registered: the answers may be unread in its socket.
    Awake again, 30 s of silence are a loss as before. Only the gap beyond `pause_after_seconds` is forgiven."""
    link = registered(PAUSING)
    assert not [e for e in ticks(link, 0.5, 10.0) if isinstance(e, Lost)]
    link.on_message(m.HeartbeatEcho(), 10.0)  # the last word heard before the freeze
    assert not [e for e in link.on_tick(110.0) if isinstance(e, Lost)]
    assert link.is_registered
    assert not [e for e in ticks(link, 110.5, 138.0) if isinstance(e, Lost)]
    assert [e for e in ticks(link, 138.5, 142.0) if isinstance(e, Lost)]


def test_a_peer_frozen_before_its_first_tick_wakes_registered() -> None:
    link = registered(PAUSING, now=5.0)
    assert not [e for e in link.on_tick(100.0) if isinstance(e, Lost)]


def test_a_merely_slow_loop_still_notices_a_silent_scheduler() -> None:
    """Ticks 1.5 s apart (each gap 0.5 s beyond the pause limit) still add up to a loss, a little later."""
    link = registered(PAUSING)
    lost = [now for now in (1.5 * i for i in range(1, 60)) if any(isinstance(e, Lost) for e in link.on_tick(now))]
    assert lost and 30.0 < lost[0] <= 50.0


def test_without_a_pause_limit_every_gap_counts() -> None:
    link = registered(WORKER)
    assert [e for e in link.on_tick(110.0) if isinstance(e, Lost)]


def test_silence_past_the_timeout_is_a_loss_any_message_counts_as_life() -> None:
    link = registered()
    link.on_message(m.Task(b"t" * 16, b"c", b""), 20.0)  # type: ignore[arg-type]
    assert not [e for e in link.on_tick(45.0) if isinstance(e, Lost)]
    (lost,) = [e for e in link.on_tick(51.0) if isinstance(e, Lost)]
    assert lost.was_registered and lost.exit_code is ExitCode.SCHEDULER_LOST
    assert link.state is LinkState.LOST and link.on_tick(60.0) == []


def test_a_forgotten_worker_registers_again() -> None:
    link = registered()
    assert kinds(link.on_message(FORGOTTEN, 5.0)) == [Forgotten, SendHello]
    assert link.state is LinkState.CONNECTING
    (again, _) = link.on_message(ACCEPTED, 5.1)
    assert isinstance(again, Registered) and again.again


def test_a_forgotten_client_is_lost() -> None:
    link = registered(CLIENT)
    (lost,) = link.on_message(FORGOTTEN, 5.0)
    assert isinstance(lost, Lost) and "dropped this peer" in lost.reason


@pytest.mark.parametrize(("settings", "is_lost"), [(CLIENT, True), (WORKER, False)])
def test_a_closed_connection_is_a_loss_only_where_asked(settings: LinkSettings, is_lost: bool) -> None:
    link = registered(settings)
    effects = link.on_disconnected(1.0)
    assert (kinds(effects) == [Lost]) is is_lost
    assert (link.state is LinkState.LOST) is is_lost


@pytest.mark.parametrize(("silence", "grace"), [(1.0, 60.0), (4.9, 60.0), (5.0, 600.0), (20.0, 600.0)])
def test_a_connection_that_died_of_silence_waits_the_away_grace_one_closed_while_talking_the_lost_one(
    silence: float, grace: float
) -> None:
    """issue 60: a scheduler that stopped closes the connection while it answers heartbeats (it is gone: the lost
    grace); this side asleep or cut off, ZeroMQ's heartbeats end the connection after a silence (the away grace)."""
    settings = LinkSettings("tcp://s:1", 1.0, 1000.0, one_heartbeat_in_flight=True, lost_on_disconnect=True,
                            lost_grace_seconds=60.0, away_grace_seconds=600.0)  # fmt: skip
    link = registered(settings)
    (notice,) = link.on_disconnected(silence)
    assert isinstance(notice, StillWaiting) and f"waiting up to {grace:g} s" in notice.text
    assert Lost not in kinds(link.on_tick(silence + grace - 0.5))
    assert kinds(link.on_tick(silence + grace + 0.5)) == [Lost]


def test_a_registered_link_ignores_the_answer_to_a_hello_sent_again() -> None:
    link = registered()
    assert link.on_message(ACCEPTED, 0.5) == []
    assert link.on_message(REFUSED, 0.6) == []
    assert link.is_registered


# ---------------------------------------------------------------- every state x every event
#
# The table is the link's specification: for a worker (registers again when forgotten, heartbeats without
# waiting for echoes) and a client (waits for each echo, lost on a closed connection or when forgotten),
# each state the link can be in, each event it can hear, the state it ends in and the effects it returns.

C, R, X, L = LinkState.CONNECTING, LinkState.REGISTERED, LinkState.REFUSED, LinkState.LOST
OTHER = m.Task(b"t" * 16, b"c", b"")  # type: ignore[arg-type]
OTHER_ERROR = m.ProtocolError("bad message", m.ProtocolErrorKind.MALFORMED)


def in_state(settings: LinkSettings, state: str) -> SchedulerLink:
    """A link in `state`, with everything it heard at time 0 (timeout 30 s, first hello retry after 2 s)."""
    link = SchedulerLink(settings)
    link.start(0.0)
    if state in ("registered", "forgotten"):
        link.on_message(ACCEPTED, 0.0)
    if state == "forgotten":
        link.on_message(FORGOTTEN, 0.0)
    elif state == "refused":
        link.on_message(REFUSED, 0.0)
    elif state == "lost":
        link.on_tick(31.0)
    return link


EVENTS = {
    "accepting reply": lambda link: link.on_message(ACCEPTED, 2.0),
    "refusing reply": lambda link: link.on_message(REFUSED, 2.0),
    "heartbeat echo": lambda link: link.on_message(m.HeartbeatEcho(), 2.0),
    "unknown peer": lambda link: link.on_message(FORGOTTEN, 2.0),
    "other message": lambda link: link.on_message(OTHER, 2.0),
    "other protocol error": lambda link: link.on_message(OTHER_ERROR, 2.0),
    "tick": lambda link: link.on_tick(2.0),
    "tick past the timeout": lambda link: link.on_tick(100.0),
    "disconnected": lambda link: link.on_disconnected(2.0),
}

#: (state it starts in, event) -> (state it ends in, effects): worker, then client where it differs.
WORKER_TABLE: dict[tuple[str, str], tuple[LinkState, list[type]]] = {
    ("connecting", "accepting reply"): (R, [Registered, SendHeartbeat]),
    ("connecting", "refusing reply"): (X, [RegistrationRefused]),
    ("connecting", "heartbeat echo"): (C, []),
    ("connecting", "unknown peer"): (C, []),
    ("connecting", "other message"): (C, []),
    ("connecting", "other protocol error"): (C, []),
    ("connecting", "tick"): (C, [SendHello]),
    ("connecting", "tick past the timeout"): (L, [Lost]),
    ("connecting", "disconnected"): (C, []),
    ("forgotten", "accepting reply"): (R, [Registered, SendHeartbeat]),
    ("forgotten", "refusing reply"): (X, [RegistrationRefused]),
    ("forgotten", "heartbeat echo"): (C, []),
    ("forgotten", "unknown peer"): (C, []),
    ("forgotten", "other message"): (C, []),
    ("forgotten", "other protocol error"): (C, []),
    ("forgotten", "tick"): (C, [SendHello]),
    ("forgotten", "tick past the timeout"): (L, [Lost]),
    ("forgotten", "disconnected"): (C, []),
    ("registered", "accepting reply"): (R, []),
    ("registered", "refusing reply"): (R, []),
    ("registered", "heartbeat echo"): (R, []),
    ("registered", "unknown peer"): (C, [Forgotten, SendHello]),
    ("registered", "other message"): (R, []),
    ("registered", "other protocol error"): (R, []),
    ("registered", "tick"): (R, [SendHeartbeat]),
    ("registered", "tick past the timeout"): (L, [Lost]),
    ("registered", "disconnected"): (R, []),
    **{(final, event): (state, []) for final, state in (("refused", X), ("lost", L)) for event in EVENTS},
}
CLIENT_TABLE = {
    **WORKER_TABLE,
    ("connecting", "unknown peer"): (L, [Lost]),
    ("connecting", "disconnected"): (L, [Lost]),
    ("registered", "unknown peer"): (L, [Lost]),
    ("registered", "tick"): (R, []),  # the heartbeat sent on registration is still unanswered
    ("registered", "disconnected"): (L, [Lost]),
}
CASES = [
    pytest.param(settings, state, event, *table[(state, event)], id=f"{peer}-{state}-{event}")
    for peer, settings, table in (("worker", WORKER, WORKER_TABLE), ("client", CLIENT, CLIENT_TABLE))
    for state in ("connecting", "forgotten", "registered", "refused", "lost")
    if not (peer == "client" and state == "forgotten")  # a client is never forgotten: it is lost
    for event in EVENTS
]


def test_the_table_covers_every_state_and_event() -> None:
    states = {"connecting", "forgotten", "registered", "refused", "lost"}
    assert set(WORKER_TABLE) == {(state, event) for state in states for event in EVENTS}
    assert {link.state for link in (in_state(WORKER, state) for state in states)} == set(LinkState)


@pytest.mark.parametrize(("settings", "state", "event", "end_state", "effects"), CASES)
def test_every_state_and_event(
    settings: LinkSettings, state: str, event: str, end_state: LinkState, effects: list[type]
) -> None:
    link = in_state(settings, state)
    assert kinds(EVENTS[event](link)) == effects
    assert link.state is end_state


@pytest.mark.parametrize(
    ("state", "code"), [("connecting", ExitCode.NEVER_CONNECTED), ("forgotten", ExitCode.NEVER_CONNECTED),
                        ("registered", ExitCode.SCHEDULER_LOST)]
)  # fmt: skip
def test_a_loss_exits_with_never_connected_unless_registered(state: str, code: ExitCode) -> None:
    (lost,) = [e for e in in_state(WORKER, state).on_tick(100.0) if isinstance(e, Lost)]
    assert lost.exit_code is code
