"""#38: scaler installed from a wheel in a folder of links (`pip install --find-links DIR scaler-compute`, or
`PIP_FIND_LINKS`), as a reader without a published package installs it. pip records no `direct_url.json` for such
an install, which looks like one from the package index; but the index has no scaler-compute (it is not on PyPI
yet), so the cloud units must get a wheel of this build, not `scaler-compute==<version>`, which the worker image
cannot install (the hub then died with only "Essential container in task exited (exit code 1)").

The install is a fresh virtual environment made with `python -m venv`, scaler-compute installed by pip from a folder
of links holding this tree's wheel, its dependencies from this environment (a `.pth` line, as
tests/integration/fresh_install.py does). PIP_FIND_LINKS names the folder, as in the reader's shell.

Checked off: with the index check asking pip with the reader's find-links (`index_only_environment` returning the
environment as it is), `on_index` finds the pin in the folder: the first test fails, and the manager's unit is
launched with `scaler-compute==<version>` (its boot report then names the install uv could not do). With the hub
launched by pin as before (`published` always true), the stack's start fails, the launcher naming what the hub's
unit could not install.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scaler import Client
from scaler.security.connection_files import discovered_connection
from tests.integration.conftest import free_addresses, wait_for
from tests.integration.fresh_install import ROOT, run_wheel
from tests.integration.test_cloud_burst import ecs_tasks

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(420)]

CONFIG = ROOT / "config" / "aws_ecs.toml"


@dataclass(frozen=True)
class FoundLinksInstall:
    python: Path
    links: Path  #: the folder of links with this tree's wheel
    cache: Path  #: the reader's ~/.cache (what the index check remembers, the wheels packed for the units)

    @property
    def bin(self) -> Path:
        return self.python.parent

    def environment(self) -> dict[str, str]:
        """The reader's shell: their environment activated, pip pointed at the folder of links."""
        path = os.pathsep.join([str(self.bin), os.environ.get("PATH", "")])
        return {
            **os.environ,
            "PATH": path,
            "VIRTUAL_ENV": str(self.bin.parent),
            "PIP_FIND_LINKS": str(self.links),
            "XDG_CACHE_HOME": str(self.cache),
        }


@pytest.fixture(scope="module")
def found_links(tmp_path_factory: pytest.TempPathFactory) -> FoundLinksInstall:
    root = tmp_path_factory.mktemp("find-links")
    wheel = run_wheel(tmp_path_factory)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, capture_output=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--find-links",
         str(wheel.parent), "scaler-compute"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    site_packages = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip())  # fmt: skip
    assert not list(site_packages.glob("scaler_compute-*.dist-info/direct_url.json")), "pip recorded where it was from"
    ours = dict.fromkeys(sysconfig.get_paths()[kind] for kind in ("purelib", "platlib"))
    (site_packages / "dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    return FoundLinksInstall(python, wheel.parent, root / "cache")


def run_in(install: FoundLinksInstall, code: str) -> str:
    done = subprocess.run([str(install.python), "-c", code], capture_output=True, text=True, timeout=300,
                          env=install.environment(), cwd=install.links, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_wheel_from_a_folder_of_links_is_not_taken_for_a_published_version(found_links: FoundLinksInstall) -> None:
    """The install looks published (no direct_url.json); the index, asked without the reader's find-links, has no
    such version: the units' environment ships a wheel of this build."""
    shown = run_in(
        found_links,
        """
from scaler.worker_manager.ship.distributions import this_build, this_python
from scaler.worker_manager.ship.environment import plan_environment
from scaler.worker_manager.ship.index_check import on_index
from scaler.worker_manager.ship.unit_target import UnitTarget

build = this_build()
target = UnitTarget(this_python())
environment = plan_environment("requirements", None, "", target, published=on_index)
print(build.is_public, on_index(build.pin, target), environment.scaler, environment.scaler_wheel is not None)
""",
    )
    assert shown.split() == ["True", "False", "None", "True"], shown


def test_a_cloud_stack_started_from_that_install_boots_its_hub_and_runs_a_task(
    found_links: FoundLinksInstall, fake_cloud: Any, tmp_path: Path
) -> None:
    """The rehearsal of `aws_ecs.toml` (the hub in the cloud), from the install above: the hub and a worker unit are
    launched with a wheel of this build (`scaler-compute @ <presigned URL>`), install it, and a task runs."""
    addresses = free_addresses()
    text = CONFIG.read_text().replace("tcp://127.0.0.1:8516", addresses.scheduler)
    text = text.replace("tcp://127.0.0.1:8517", addresses.object_storage)
    stack_file = tmp_path / "aws_ecs.toml"
    stack_file.write_text(text.replace('environment = "sync"', 'environment = "requirements"'))
    log_path = tmp_path / "stack.log"
    with open(log_path, "wb") as log:
        stack = subprocess.Popen(
            [str(found_links.bin / "scaler"), str(stack_file)], env=found_links.environment(), stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=tmp_path,
        )  # fmt: skip
    try:
        wait_for(lambda: discovered_connection(addresses.scheduler) is not None or stack.poll() is not None,
                 "the stack's hub to be up", 240, interval=0.5)  # fmt: skip
        assert stack.poll() is None, log_path.read_text(errors="replace")
        with Client(address=addresses.scheduler, timeout_seconds=120) as client:
            future = client.submit(pow, 2, 5)
            wait_for(lambda: ecs_tasks("ecs"), "the manager's first unit", 120, interval=0.5)
            for manager_id in ("ecs-hub", "ecs"):
                assert _shipped(manager_id).startswith("scaler-compute @ http"), _shipped(manager_id)
            assert future.result(timeout=240) == 32
        stack.send_signal(signal.SIGINT)
        assert stack.wait(120) == 0, log_path.read_text(errors="replace")
    finally:
        if stack.poll() is None:
            os.killpg(stack.pid, signal.SIGKILL)
            stack.wait(30)
        subprocess.run([str(found_links.bin / "scaler"), str(stack_file), "--down"], env=found_links.environment(),
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip


def _shipped(manager_id: str) -> str:
    """The PYTHON_REQUIREMENTS a unit of the manager was launched with."""
    (task, *_) = ecs_tasks(manager_id)
    (override,) = task["overrides"]["containerOverrides"]
    return str({item["name"]: item["value"] for item in override["environment"]}["PYTHON_REQUIREMENTS"])
