"""`SCALER_PROFILE_DIR` (scaler/io/process_profiling.py) on a local cluster: its scheduler and its worker agents
write their cProfile there when they stop, as `python -m` components do (the scale harness reads the scheduler's:
benchmarks/scale/README.md, "Profiles")."""

from __future__ import annotations

import pstats
from collections.abc import Callable
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo

pytestmark = pytest.mark.integration


def add_one(value: int) -> int:
    return value + 1


def test_a_local_clusters_scheduler_and_agents_write_their_profiles(
    make_cluster: Callable[..., SchedulerClusterCombo], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task runs; once the cluster stops, the profile directory holds the scheduler's profile (its event loop ran)
    and one per worker agent. Checked by hand with `cluster/host.py` starting its processes without `run_profiled`
    (as before): no scheduler or worker profile is written, and this fails."""
    monkeypatch.setenv("SCALER_PROFILE_DIR", str(tmp_path))
    cluster = make_cluster(n_workers=1)
    with Client(cluster.get_address()) as client:
        assert client.submit(add_one, 1).result(timeout=60) == 2
    cluster.shutdown()
    scheduler = sorted(tmp_path.glob("scheduler-*.prof"))
    assert len(scheduler) == 1, sorted(path.name for path in tmp_path.iterdir())
    assert len(list(tmp_path.glob("worker-*.prof"))) == 1
    functions = {name for _, _, name in pstats.Stats(str(scheduler[0])).stats}  # type: ignore[attr-defined]
    assert "run_until_complete" in functions
