"""Actors made and dropped in a loop, a call each (core/actors.py rule 3: a stopped actor ends once the calls made
before its stop have run): each handle is collected right after its call is made, so the actor's stop follows the
call at once, and the processors that hosted the actors are retired or take the next ones. Every call gets its own
result.

Checked to fail before the fixes: some call ended ActorDiedError "the actor A ended: it was stopped" within a few
rounds (a processor retired under an actor that had just ended lost its call's result on its link); a later round's
actors were never placed (a processor that had hosted an actor took no task any more). Checked on the one route by
hand with `ActorRecord` calls not counted when a surplus processor is retired (`Actors.calls_at` returning False):
some call ended ActorDiedError "its processor's link closed"."""

from __future__ import annotations

from typing import Any

import pytest

from scaler import Client
from tests.integration.conftest import DEADLINE_SECONDS

pytestmark = pytest.mark.integration

ROUNDS = 20
ACTORS = 11


class Holder:
    def __init__(self, value: int) -> None:
        self.value = value

    def get(self) -> int:
        return self.value


@pytest.mark.timeout(300)
def test_actors_dropped_right_after_a_call_each_answer_every_call(make_cluster: Any) -> None:
    cluster = make_cluster(2)
    with Client(cluster.get_address()) as client:
        for _ in range(ROUNDS):
            calls, starts = [], []
            for value in range(ACTORS):
                holder = client.actor(Holder, value)  # the handle before is collected here: its actor is stopped
                calls.append(holder.get())
                starts.append(holder.started)
            del holder
            assert [call.result(timeout=DEADLINE_SECONDS) for call in calls] == list(range(ACTORS))
            assert [start.result(timeout=DEADLINE_SECONDS) for start in starts] == [None] * ACTORS, "each one ended"
