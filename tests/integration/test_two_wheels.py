"""The two wheels of this tree, as the README's "First steps" build them into one folder: the product's carries no
test double (no rehearsal module, no rehearsal command, no rehearsal package data) and names the rehearsals of its
version in the extras that install them; the rehearsals' carries them, with the fake cloud's package data (the
worker image's entrypoint, the EC2 shims) and its three commands.

Checked with the mechanisms off: with `fake_cloud/image/*.sh` left out of rehearsal/pyproject.toml's package data,
the rehearsals' wheel has no entrypoint and the second test fails; with scaler/testing/ back in the product's tree
(a copy of rehearsal/scaler_rehearsal/testing/), the first fails naming its files."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from scaler.version import __version__
from tests.integration.fresh_install import run_wheel

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

#: What moved out of the product, as paths in its wheel.
REHEARSAL_PATHS = ("scaler/fake_cloud/", "scaler/fake_kubernetes/", "scaler/testing/", "scaler/rehearsal/",
                   "scaler_rehearsal/")  # fmt: skip
REHEARSAL_COMMANDS = ("scaler_fake_cloud", "scaler_fake_kubernetes", "scaler_link")


def _read(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(name).decode()


def test_the_products_wheel_carries_no_test_double(tmp_path_factory: pytest.TempPathFactory) -> None:
    wheel = run_wheel(tmp_path_factory)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert [name for name in names if name.startswith(REHEARSAL_PATHS)] == []
    info = f"scaler_compute-{__version__}.dist-info"
    commands = _read(wheel, f"{info}/entry_points.txt")
    assert [command for command in REHEARSAL_COMMANDS if f"{command} =" in commands] == []
    metadata = _read(wheel, f"{info}/METADATA")
    for extra in ("fake-cloud", "fake-kubernetes"):
        assert f'Requires-Dist: scaler-rehearsal=={__version__}; extra == "{extra}"' in metadata, extra


def test_the_rehearsals_wheel_beside_it_carries_them(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = run_wheel(tmp_path_factory).parent
    assert sorted(path.name for path in folder.glob("*.whl")) == [
        f"scaler_compute-{__version__}-py3-none-any.whl", f"scaler_rehearsal-{__version__}-py3-none-any.whl"
    ]  # fmt: skip
    wheel = folder / f"scaler_rehearsal-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    expected = {"scaler_rehearsal/py.typed", "scaler_rehearsal/fake_cloud/image/worker-entrypoint.sh",
                "scaler_rehearsal/fake_cloud/shims/dnf", "scaler_rehearsal/fake_cloud/shims/shutdown",
                "scaler_rehearsal/fake_kubernetes/cluster.py", "scaler_rehearsal/testing/simulated_stack.py",
                "scaler_rehearsal/entry_points/link.py"}  # fmt: skip
    assert sorted(expected - names) == []
    info = f"scaler_rehearsal-{__version__}.dist-info"
    commands = _read(wheel, f"{info}/entry_points.txt")
    assert [command for command in REHEARSAL_COMMANDS if f"{command} =" not in commands] == []
    assert f"Requires-Dist: scaler-compute=={__version__}" in _read(wheel, f"{info}/METADATA")
