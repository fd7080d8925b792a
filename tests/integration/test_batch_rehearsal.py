"""#38 finding 3 (goal 3): a function of a module of the user's working folder runs on AWS Batch, and a worker that
cannot import such a module says what to do.

The documented Batch rehearsal itself (`scaler_fake_cloud` with no --image: its own `scaler-batch-job` image has this
build baked in; `provision`; `scaler aws_batch.toml`; a client mapping a function of a working-folder module, which
travels with each task) is walked by the documentation tier: docs/guide/scaling_and_cloud.md's Batch section runs
those commands as written, from the wheel installed in a fresh environment (tests/docs/test_pages.py; its `pricing.py`
is the working-folder module). With the catalogue's `scaler-batch-job` image baking nothing (as before), every job
dies with "No module named 'scaler'" and that page fails; with the launcher no longer setting `ship_local_modules`,
its map fails with "No module named 'pricing'". tests/integration/test_aws_hpc.py runs the same example file with
its failures, clean-up and shutdown. (This file's own walk of the rehearsal repeated the page's and was removed to
keep the suite within CI's time, #38.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import Launcher

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

MODULE = "def score(x):\n    return x * x + 1\n"


def test_a_worker_without_the_module_says_what_to_do(launcher: Launcher, tmp_path: Path) -> None:
    addresses, _scheduler, _storage = launcher.stack(workers=1)  # a plain scheduler: modules go by reference
    (tmp_path / "analysis38.py").write_text(MODULE)
    code = "import sys, analysis38\nfrom scaler import Client\nwith Client(address=sys.argv[1]) as c:\n" \
           "    c.submit(analysis38.score, 1).result()\n"  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, addresses.scheduler], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 1
    assert "ModuleNotFoundError(\"No module named 'analysis38'\"): the module is not importable where the task ran" \
        in done.stderr, done.stderr[-3000:]  # fmt: skip
    assert "--ship-local-modules" in done.stderr and "register_pickle_by_value" in done.stderr
