"""#38 finding 4, the smaller ones: `scaler_gui -h` recommends only flags it takes (it named `--host`, which only
`scaler_ui` takes), a dashboard bound on every interface says how other machines reach it (it logged only
`http://127.0.0.1`), and `import scaler.joblib` without joblib says which extra to install (a bare
ModuleNotFoundError). Real commands, a fresh interpreter without joblib.

Checked by switching the mechanisms off: with the old help text the first test fails; with `page_urls` giving the
loopback URL only the second; without the check in scaler/joblib.py the third (a traceback into
scaler/compat/joblib.py)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from scaler.monitor.dashboard import page_urls
from tests.integration.conftest import BIN_DIR

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def help_of(command: str) -> str:
    done = subprocess.run([str(BIN_DIR / command), "-h"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())


def test_each_dashboard_command_recommends_a_flag_it_takes() -> None:
    gui = help_of("scaler_gui")
    assert "--host" not in gui and "(--gui-address 0.0.0.0:50001)" in gui
    ui = help_of("scaler_ui")
    assert "(--host 0.0.0.0)" in ui and "[--host WEB_HOST]" in ui


def test_a_page_on_every_interface_names_how_other_machines_reach_it() -> None:
    assert page_urls("127.0.0.1", 8080) == ["http://127.0.0.1:8080/"]
    urls = page_urls("0.0.0.0", 8080)
    assert urls[0] == "http://127.0.0.1:8080/"
    assert f"http://{socket.gethostname()}:8080/" in urls[1:]
    assert len(urls) == len(set(urls))


def test_scaler_joblib_without_joblib_names_the_extra() -> None:
    code = 'import sys; sys.modules["joblib"] = None\nimport scaler.joblib'
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "ModuleNotFoundError: scaler.joblib needs joblib, which is not installed: pip install "
        "'scaler-compute[joblib]' (or pip install joblib)"
    ), done.stderr
    assert "compat/joblib.py" not in done.stderr, "stopped before the backend's own imports"


def test_a_cloud_stack_whose_address_is_taken_names_it() -> None:
    """`scaler FILE` with hub = "cloud" said only "[Errno 98] Address already in use"."""
    from scaler.cluster.cloud_hub import Listeners

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=rf"cannot listen at the file's address tcp://127.0.0.1:{port}: port "
                           rf"{port} is already in use \(pid \d+"):  # fmt: skip
            Listeners([f"tcp://127.0.0.1:{port}"])
