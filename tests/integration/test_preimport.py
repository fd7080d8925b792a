"""`--preimport` as documented (docs/guide/code_on_workers.md, "Packages"): the worker's zygote imports the modules
once, before it forks a processor, so every processor (a replacement too) starts with them imported; a name that is no
module name, or a module that fails to import, stops the worker with a message naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler import Client
from scaler.errors import ProcessorDiedError
from tests.integration.conftest import DEADLINE_SECONDS, wait_for_workers

pytestmark = pytest.mark.integration

PROBE_MODULE = """
import os

IMPORTED_BY = os.getpid()
with open(os.environ["PREIMPORT_MARKER"], "a") as marker:
    marker.write(f"{IMPORTED_BY}\\n")
"""

BROKEN_MODULE = """
raise RuntimeError("this module breaks on purpose")
"""


def where_imported() -> tuple[int, int, int]:
    """(the pid that imported the probe, this processor's pid, its parent's pid)."""
    import os

    import preimport_probe  # type: ignore[import-not-found]

    return preimport_probe.IMPORTED_BY, os.getpid(), os.getppid()


def exit_abruptly() -> None:
    import os

    os._exit(5)


@pytest.fixture
def probe_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    (tmp_path / "preimport_probe.py").write_text(PROBE_MODULE)
    (tmp_path / "preimport_broken.py").write_text(BROKEN_MODULE)
    marker = tmp_path / "imported"
    return {"PYTHONPATH": str(tmp_path), "PREIMPORT_MARKER": str(marker)}, marker


@pytest.mark.timeout(60)
def test_the_zygote_imports_once_for_every_processor(launcher, probe_env):
    env, marker = probe_env
    addresses, _, _ = launcher.stack(workers=0)
    launcher.worker(addresses.scheduler, "--preimport", "json", "preimport_probe", env=env)
    wait_for_workers(addresses.monitor, 1)
    with Client(address=addresses.scheduler) as client:
        imported_by, first, zygote = client.submit(where_imported).result(timeout=DEADLINE_SECONDS)
        assert imported_by == zygote != first  # imported before the fork, not by the task
        with pytest.raises(ProcessorDiedError):
            client.submit(exit_abruptly).result(timeout=DEADLINE_SECONDS)
        again, second, same_zygote = client.submit(where_imported).result(timeout=DEADLINE_SECONDS)
    assert second != first and same_zygote == zygote and again == zygote  # the replacement starts with it too
    assert marker.read_text().split() == [str(zygote)]  # one import for the worker


@pytest.mark.timeout(60)
def test_a_module_that_fails_to_import_stops_its_worker_loudly(launcher, probe_env):
    env, _ = probe_env
    addresses, _, _ = launcher.stack(workers=0)
    broken = launcher.worker(addresses.scheduler, "--preimport", "preimport_probe", "preimport_broken", env=env)
    assert broken.wait_exit(DEADLINE_SECONDS) != 0
    log = broken.log_text()
    assert "cannot import module 'preimport_broken'" in log
    assert "this module breaks on purpose" in log


@pytest.mark.timeout(60)
def test_a_name_that_is_no_module_name_is_refused_before_the_worker_starts(launcher, probe_env):
    env, _ = probe_env
    addresses, _, _ = launcher.stack(workers=0)
    refused = launcher.worker(addresses.scheduler, "--preimport", "numpy;rm", env=env)
    assert refused.wait_exit(DEADLINE_SECONDS) == 2
    assert "bad --preimport 'numpy;rm'" in refused.log_text()
