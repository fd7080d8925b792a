"""#38: scaler installed from a wheel in a folder of links (`pip install --find-links DIR scaler-compute`, or
`PIP_FIND_LINKS`), as a reader without a published package installs it. pip records no `direct_url.json` for such
an install, which looks like one from the package index; but the index has no scaler-compute (it is not on PyPI
yet), so the cloud units must get a wheel of this build, not `scaler-compute==<version>`, which the worker image
cannot install (the hub then died with only "Essential container in task exited (exit code 1)").

The install is a fresh virtual environment with venv's pip (`venv_with_pip`), scaler-compute installed by that pip
(not compiling to bytecode, as the documentation tier's readers' pip) from a folder of links holding this tree's
wheel, its dependencies from this environment (a `.pth` line, as tests/integration/fresh_install.py does).
PIP_FIND_LINKS names the folder, as in the reader's shell.

Checked off: with the index check asking pip with the reader's find-links (`index_only_environment` returning the
environment as it is), `on_index` finds the pin in the folder: the test fails (the manager's unit would be launched
with `scaler-compute==<version>`, which its boot report then names as the install uv could not do).

What the units do with such a plan (the hub and a worker unit launched with a wheel of this build, `scaler-compute @
<presigned URL>`, installing it, and a task running) is what the documentation tier's docs/guide/scaling_and_cloud.md
walks from its reader's wheel install (tests/docs/test_pages.py): with the hub launched by pin as before, that page's
`scaler aws_ecs.toml` fails at its start. This file's own cloud stack repeated that walk and was removed to keep the
suite within CI's time (#38).
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.readers import NO_COMPILE
from tests.integration.fresh_install import run_wheel, venv_with_pip

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]


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
    python = venv_with_pip(root / "venv")
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--find-links",
         str(wheel.parent), "scaler-compute"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, env={**os.environ, **NO_COMPILE},
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
    such version: the units' environment ships a wheel of this build, as the managers plan it at their start (the
    worker units': `start_problem`) and for the stack's hub unit (`make_shipment`, with no environment planned)."""
    shown = run_in(
        found_links,
        """
from scaler.config.sections import CloudUnitSettings
from scaler.worker_manager.aws.units import make_shipment, start_problem
from scaler.worker_manager.ship.distributions import this_build, this_python
from scaler.worker_manager.ship.index_check import on_index
from scaler.worker_manager.ship.unit_target import UnitTarget

build = this_build()
settings = CloudUnitSettings(environment="requirements")
problem, workers = start_problem(settings, "ecs_python_version", None, None)
hub = make_shipment(settings, None, "ecs-hub", 60.0, None, None).environment
print(build.is_public, on_index(build.pin, UnitTarget(this_python())), problem)
print(workers.scaler, workers.scaler_wheel is not None, hub.scaler, hub.scaler_wheel is not None)
""",
    )
    assert shown.split() == ["True", "False", "None", "None", "True", "None", "True"], shown
