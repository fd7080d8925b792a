"""The processor protocol's table (scaler/protocol/processor_protocol.py): total, consistent with where each outcome
leads, compiled faithfully, and without dead ends: every state is reachable from QUEUED and every task can end."""

from __future__ import annotations

import itertools

from scaler.protocol.processor_protocol import (
    OUTCOMES,
    PARKED_STATES,
    STOPPED_STATES,
    TARGETS,
    TRANSITIONS,
    UNCHANGED,
    ProcessorOutcome,
    ProcessorTaskEvent,
    ProcessorTaskState,
    after,
    outcome,
)


def test_every_state_and_event_pair_has_an_explicit_outcome() -> None:
    pairs = set(itertools.product(ProcessorTaskState, ProcessorTaskEvent))
    assert set(TRANSITIONS) == pairs, f"missing: {sorted(pairs - set(TRANSITIONS))}"


def test_every_outcome_is_used_and_says_where_it_leads() -> None:
    assert set(TRANSITIONS.values()) == set(ProcessorOutcome)
    assert set(TARGETS) | UNCHANGED == set(ProcessorOutcome) and not set(TARGETS) & UNCHANGED


def test_the_compiled_table_is_the_table() -> None:
    for (state, event), done in TRANSITIONS.items():
        assert OUTCOMES[event][state] is done is outcome(state, event)
        assert after(state, event) == (state if done in UNCHANGED else TARGETS[done])


def test_an_outcome_leads_to_the_same_state_from_wherever_it_is_taken() -> None:
    """An outcome names one move: a task that stops while parked ends STOPPING_PARKED whether it had asked to go on
    or not, and so on."""
    for (state, event), done in TRANSITIONS.items():
        if done not in UNCHANGED:
            assert after(state, event) == TARGETS[done], (state, event)


def reachable(start: ProcessorTaskState) -> set[ProcessorTaskState | None]:
    seen: set[ProcessorTaskState | None] = {start}
    frontier = [start]
    while frontier:
        state = frontier.pop()
        for event in ProcessorTaskEvent:
            following = after(state, event)
            if following not in seen:
                seen.add(following)
                if following is not None:
                    frontier.append(following)
    return seen


def test_every_state_is_reachable_from_queued_and_every_task_can_end() -> None:
    assert reachable(ProcessorTaskState.QUEUED) == {*ProcessorTaskState, None}
    for state in ProcessorTaskState:
        assert None in reachable(state), f"a task {state.name} can never end"


def test_a_processor_that_is_gone_ends_every_task_it_held_and_requeues_only_the_staged_ones() -> None:
    in_processor = [state for state in ProcessorTaskState if state is not ProcessorTaskState.QUEUED]
    assert {state: after(state, ProcessorTaskEvent.GONE) for state in in_processor} == {
        **{state: None for state in in_processor},
        ProcessorTaskState.STAGED: ProcessorTaskState.QUEUED,
    }


def test_a_result_ends_every_task_in_a_processor_and_is_only_an_answer_from_a_stopped_one() -> None:
    assert outcome(ProcessorTaskState.QUEUED, ProcessorTaskEvent.END) is ProcessorOutcome.IGNORE
    unwound = {
        state for state in ProcessorTaskState if outcome(state, ProcessorTaskEvent.END) is ProcessorOutcome.UNWOUND
    }
    assert unwound == STOPPED_STATES
    assert all(
        after(state, ProcessorTaskEvent.END) is None
        for state in ProcessorTaskState
        if state is not ProcessorTaskState.QUEUED
    )


def test_a_cancel_reaches_every_task_not_stopped_already() -> None:
    ignored = {
        state for state in ProcessorTaskState if outcome(state, ProcessorTaskEvent.CANCEL) is ProcessorOutcome.IGNORE
    }
    assert ignored == STOPPED_STATES


def test_the_parked_states_are_those_a_park_leads_through_without_the_turn() -> None:
    parked = reachable(ProcessorTaskState.PARKED) - {None, ProcessorTaskState.COMPUTING, ProcessorTaskState.STOPPING}
    assert parked == PARKED_STATES
