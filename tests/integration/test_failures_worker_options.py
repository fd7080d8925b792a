"""Worker start-up options run as documented: --preload runs once per processor before any task and a
failing preload stops only its worker, loudly; --per-worker-capabilities reach the scheduler's status."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler import Client
from scaler.errors import ProcessorDiedError
from tests.integration.conftest import DEADLINE_SECONDS, monitor, wait_for_workers

pytestmark = pytest.mark.integration

PRELOAD_MODULE = """
import os


def configure(environment, debug=True):
    os.environ["PRELOADED_FOR"] = f"{environment} debug={debug}"
    with open(os.environ["PRELOAD_MARKER"], "a") as marker:
        marker.write(f"{os.getpid()}\\n")


def explode():
    raise RuntimeError("the preload exploded on purpose")
"""


def preload_seen() -> tuple[int, str]:
    """(processor pid, what the preload left in this processor's environment)."""
    import os

    return os.getpid(), os.environ.get("PRELOADED_FOR", "")


def exit_abruptly() -> None:
    import os

    os._exit(5)


@pytest.fixture
def preload_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Environment that puts a preload module on the path, and the file where it records processor pids."""
    (tmp_path / "preload_probe.py").write_text(PRELOAD_MODULE)
    marker = tmp_path / "preloaded"
    return {"PYTHONPATH": str(tmp_path), "PRELOAD_MARKER": str(marker)}, marker


def preloaded_pids(marker: Path) -> list[int]:
    return [int(line) for line in marker.read_text().split()] if marker.exists() else []


@pytest.mark.timeout(60)
def test_preload_runs_once_per_processor_before_its_tasks(launcher, preload_env):
    env, marker = preload_env
    addresses, _, _ = launcher.stack(workers=0)
    launcher.cluster(addresses.scheduler, 1, "--preload", "preload_probe:configure('production', debug=False)", env=env)
    wait_for_workers(addresses.monitor, 1)
    with Client(address=addresses.scheduler) as client:
        first, seen = client.submit(preload_seen).result(timeout=DEADLINE_SECONDS)
        assert seen == "production debug=False"
        assert client.submit(preload_seen).result(timeout=DEADLINE_SECONDS) == (first, seen)
        with pytest.raises(ProcessorDiedError):
            client.submit(exit_abruptly).result(timeout=DEADLINE_SECONDS)
        second, seen = client.submit(preload_seen).result(timeout=DEADLINE_SECONDS)
        assert seen == "production debug=False"
    assert second != first
    pids = preloaded_pids(marker)
    assert first in pids and second in pids
    assert len(pids) == len(set(pids)), f"a processor ran the preload twice: {pids}"


@pytest.mark.timeout(60)
def test_failing_preload_is_logged_and_stops_its_worker_while_healthy_pool_serves(launcher, preload_env):
    env, _ = preload_env
    addresses, _, _ = launcher.stack(workers=0)
    launcher.cluster(addresses.scheduler, 2, env=env)
    broken = launcher.worker(addresses.scheduler, "--preload", "preload_probe:explode", env=env)
    assert broken.wait_exit(DEADLINE_SECONDS) != 0
    log = broken.log_text()
    assert "preload_probe:explode" in log
    assert "the preload exploded on purpose" in log
    wait_for_workers(addresses.monitor, 2)
    with Client(address=addresses.scheduler) as client:
        assert client.map(pow, range(6), [2] * 6) == [0, 1, 4, 9, 16, 25]


@pytest.mark.timeout(60)
def test_per_worker_capabilities_are_advertised_in_status_snapshot(launcher):
    addresses, _, _ = launcher.stack(workers=0)
    launcher.worker(addresses.scheduler, "--per-worker-capabilities", "linux,cpu=8")
    with monitor(addresses.monitor) as next_snapshot:
        snapshot = next_snapshot(lambda s: len(s.workers) == 1)
    assert dict(snapshot.workers[0].capabilities) == {"linux": -1, "cpu": 8}
