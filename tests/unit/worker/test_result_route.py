"""The route of a processor's results (processor/result_route.py): its table is total, and the rules in its docstring
hold for the sequences that matter (a refusal crossing a later hello, a scheduler that forgot the link)."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.worker.processor.result_route import TRANSITIONS, ResultRoute, RouteEvent, RouteState

ACCEPTED = m.HelloReply(True)
REFUSED = m.HelloReply(False, "its worker is not registered")
FORGOTTEN = m.ProtocolError("unknown peer", m.ProtocolErrorKind.UNKNOWN_PEER)


def test_the_table_is_total() -> None:
    assert set(TRANSITIONS) == {(state, event) for state in RouteState for event in RouteEvent}


def test_results_go_through_the_agent_until_the_scheduler_accepts_the_link() -> None:
    route = ResultRoute()
    assert not route.is_open
    assert route.configured(), "rule 2: the processor says hello"
    assert route.state is RouteState.OPENING and not route.is_open
    assert not route.heard(ACCEPTED)
    assert route.is_open


def test_a_refusal_closes_the_route_until_the_agent_configures_the_processor_again() -> None:
    route = ResultRoute()
    route.configured()
    route.heard(REFUSED)
    assert route.state is RouteState.CLOSED
    assert not route.heard(FORGOTTEN), "rule 4: nothing is said on a closed link"
    assert route.configured()
    route.heard(ACCEPTED)
    assert route.is_open


def test_a_refusal_of_an_earlier_hello_waits_for_the_answer_to_the_later_one() -> None:
    """The agent registered again while the first hello was in flight (a scheduler restart): the old instance's
    refusal must not close a route whose second hello the new instance will accept."""
    route = ResultRoute()
    route.configured()
    route.configured()
    route.heard(REFUSED)
    assert route.state is RouteState.OPENING
    route.heard(ACCEPTED)
    assert route.is_open


def test_a_scheduler_that_forgot_the_link_is_told_hello_again_and_results_go_through_the_agent_meanwhile() -> None:
    route = ResultRoute()
    route.configured()
    route.heard(ACCEPTED)
    assert route.heard(FORGOTTEN), "rule 4: say hello again"
    assert route.state is RouteState.OPENING
    assert not route.heard(FORGOTTEN), "one hello in flight answers every result sent before it"
    route.heard(ACCEPTED)
    assert route.is_open


def test_other_messages_on_the_link_change_nothing() -> None:
    route = ResultRoute()
    route.configured()
    route.heard(ACCEPTED)
    assert not route.heard(m.Ping(1)) and not route.heard(m.ProtocolError("malformed"))
    assert route.is_open
