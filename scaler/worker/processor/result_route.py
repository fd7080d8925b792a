"""Where a processor's results go (pure): to the scheduler on the processor's own link, once the scheduler accepted
that link, else through the agent. The shell (`processor/outlet.py`) feeds it what the agent and the scheduler say
and asks it where each result goes; docs/protocol.md section 3.7 is the wire's side of it.

Rules:
1. The route starts CLOSED: every result goes through the agent (a TaskResult on the channel, which the agent sends
   on to the scheduler, as a processor without a link does).
2. When the agent configures the processor (its HelloReply on the channel: the agent is registered with the
   scheduler, now or again after a restart), the processor says hello on its link (role `processor`, naming its
   worker): OPENING. Results still go through the agent until the scheduler answers.
3. An accepted HelloReply on the link opens the route (OPEN): from then on the result of each task that ran, and its
   TaskLogs, go to the scheduler on the link, and the agent is told with a ResultSent (the result's frame) on the
   channel, in the order of everything else the processor tells it. CANCELED answers, ProcessorBlocked and the
   other reports go to the agent only. Results never wait for the route: the agent keeps every ResultSent until the
   scheduler names it read (agent/result_journal.py), so one the scheduler did not read is sent again.
4. A refused HelloReply closes the route, unless a later hello is still unanswered (its answer decides); it stays
   closed until the agent configures the processor again. A ProtocolError `unknownPeer` on the link (the scheduler
   forgot the processor: it restarted, or dropped its worker) makes an OPEN route say hello again (OPENING).
5. Nothing else read on the link changes the route (a Ping, a ProtocolError of another kind).

Every (state, event) pair has an explicit outcome in TRANSITIONS; `tests/unit/worker/test_result_route.py` checks that
the table is total.
"""

from __future__ import annotations

import enum

from scaler.protocol import messages as m


class RouteState(enum.Enum):
    CLOSED = "closed"  #: results go through the agent; no hello in flight
    OPENING = "opening"  #: a hello is in flight; results go through the agent
    OPEN = "open"  #: the scheduler accepted the link: results go on it


class RouteEvent(enum.Enum):
    CONFIGURED = "configured"  #: the agent's HelloReply on the channel (rule 2)
    ACCEPTED = "accepted"  #: an accepted HelloReply on the link
    REFUSED = "refused"  #: a refused HelloReply on the link
    FORGOTTEN = "forgotten"  #: ProtocolError unknownPeer on the link


class RouteOutcome(enum.Enum):
    IGNORE = "ignore"  #: nothing changes
    HELLO = "hello"  #: say hello on the link: OPENING
    OPEN = "open"  #: OPEN
    CLOSE = "close"  #: CLOSED, unless another hello is unanswered (then OPENING)


S, E, Do = RouteState, RouteEvent, RouteOutcome

#: The outcome of every (state, event) pair (rules in the module docstring).
TRANSITIONS: dict[tuple[RouteState, RouteEvent], RouteOutcome] = {
    (S.CLOSED, E.CONFIGURED): Do.HELLO,
    (S.CLOSED, E.ACCEPTED): Do.OPEN,  # the answer to a hello sent before a refusal of an earlier one
    (S.CLOSED, E.REFUSED): Do.CLOSE,
    (S.CLOSED, E.FORGOTTEN): Do.IGNORE,  # it sends nothing on the link while closed
    (S.OPENING, E.CONFIGURED): Do.HELLO,  # the agent registered again meanwhile: say it again
    (S.OPENING, E.ACCEPTED): Do.OPEN,
    (S.OPENING, E.REFUSED): Do.CLOSE,
    (S.OPENING, E.FORGOTTEN): Do.IGNORE,  # about a result sent before the hello in flight, whose answer decides
    (S.OPEN, E.CONFIGURED): Do.HELLO,  # the agent registered again (a scheduler restart): so does the link
    (S.OPEN, E.ACCEPTED): Do.OPEN,
    (S.OPEN, E.REFUSED): Do.CLOSE,
    (S.OPEN, E.FORGOTTEN): Do.HELLO,
}


class ResultRoute:
    """The route's state, and the hellos in flight on the link."""

    def __init__(self) -> None:
        self.state = RouteState.CLOSED
        self._unanswered = 0  #: hellos sent on the link and not answered yet

    @property
    def is_open(self) -> bool:
        return self.state is RouteState.OPEN

    def configured(self) -> bool:
        """The agent configured the processor (rule 2): True when a hello is to be said on the link."""
        return self._apply(RouteEvent.CONFIGURED)

    def heard(self, message: m.Message) -> bool:
        """Something read on the link: True when a hello is to be said on it (again)."""
        if isinstance(message, m.HelloReply):
            self._unanswered = max(0, self._unanswered - 1)
            return self._apply(RouteEvent.ACCEPTED if message.accepted else RouteEvent.REFUSED)
        if isinstance(message, m.ProtocolError) and message.kind is m.ProtocolErrorKind.UNKNOWN_PEER:
            return self._apply(RouteEvent.FORGOTTEN)
        return False

    def _apply(self, event: RouteEvent) -> bool:
        outcome = TRANSITIONS[(self.state, event)]
        if outcome is RouteOutcome.HELLO:
            self.state = RouteState.OPENING
            self._unanswered += 1
            return True
        if outcome is RouteOutcome.OPEN:
            self.state = RouteState.OPEN
        elif outcome is RouteOutcome.CLOSE:
            self.state = RouteState.OPENING if self._unanswered else RouteState.CLOSED
        return False
