"""The suite's processes start what they test with Ctrl-C as a terminal's: a run started with SIGINT ignored (in the
background of a script: `nohup make test &`) does not hand that to the servers its tests stop with SIGINT
(tests/conftest.py)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest


@pytest.mark.timeout(60)
def test_a_process_the_tests_start_takes_ctrl_c_however_the_run_was_started() -> None:
    disposition = subprocess.run(
        [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip()  # fmt: skip
    assert disposition == "False", "a process the tests start ignores SIGINT: their Ctrl-C would not stop it"
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
