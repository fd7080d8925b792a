"""A tick of an idle cluster looks at no processor link (issue 58: at 10,000 idle workers the
tick's pass over every link was 5 ms, 2% of a core at four ticks a second; now 1 ms). What a tick does for a link
that holds tasks is tested with the rules themselves (test_link_sessions.py, test_scheduler_core.py)."""

from __future__ import annotations

import pytest

from scaler.scheduler.core.events import Tick
from scaler.scheduler.core.processor_links import ProcessorLink
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.testing.simulation import PYTHON, SimulatedCluster, task


def test_a_tick_looks_only_at_links_that_hold_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """200 workers with a link each, one task running: a tick asks one link whether it is stuck. Fails with the pass
    over every link (200 asked)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    for number in range(200):
        sim.add_worker(f"w{number}")
    sim.submit(client, [task(client.peer, 1)])
    asked: list[ProcessorLink] = []
    stuck = ProcessorLink.stuck

    def counted(link: ProcessorLink, now: float) -> bool:
        asked.append(link)
        return stuck(link, now)

    monkeypatch.setattr(ProcessorLink, "stuck", counted)
    sim.time.advance(0.25)
    sim.feed(Tick(sim.now))
    assert len(asked) == 1 and asked[0].tasks
