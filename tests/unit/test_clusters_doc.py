"""docs/guide/clusters.md says what `scaler FILE` does when one of its children dies as the launcher does it
(scaler/cluster/launcher.py; the restart itself: tests/integration/test_scheduler_restart.py).

Found walking the page: it said "A child that dies stops the rest and `scaler` exits 1", but a scheduler killed in
a running `local` stack was started again ("scheduler exited unexpectedly ...; restarting it (1 of 5) in 1 s") and
the stack went on. Checked against the page before its fix: this test failed naming that sentence.
"""

from __future__ import annotations

import re
from pathlib import Path

from scaler.cluster.launcher import SCHEDULER_RESTARTS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "clusters.md"


def test_the_page_says_a_dead_scheduler_is_started_again_as_often_as_the_launcher_does() -> None:
    page = re.sub(r"\s+", " ", PAGE.read_text())
    assert "A child that dies stops the rest" not in page, "a dead scheduler does not stop the stack: it is restarted"
    said = re.search(r"scheduler that dies is started again at the same address \(up to (\d+) times", page)
    assert said is not None, "docs/guide/clusters.md no longer says what `scaler FILE` does when its scheduler dies"
    assert int(said.group(1)) == SCHEDULER_RESTARTS
    assert re.search(
        rf"any other child that dies, or a scheduler past those {SCHEDULER_RESTARTS} restarts, stops", page
    )
