"""The repository's two distributions agree: scaler-rehearsal (rehearsal/) has the product's version and pins it,
the product's `fake-cloud` and `fake-kubernetes` extras pin the rehearsals of that version, and each console command
is declared by one of them, from its own package's entry points.

Checked with the pins apart: with the rehearsal's version bumped alone, or an extra pinning another version, the
tests fail naming the pin."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from scaler.version import __version__

REPOSITORY = Path(__file__).resolve().parents[2]
#: The extras that install the rehearsals.
REHEARSAL_EXTRAS = ("fake-cloud", "fake-kubernetes")


def _project(path: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(path.read_text())["project"]
    return project


PRODUCT = _project(REPOSITORY / "pyproject.toml")
REHEARSAL = _project(REPOSITORY / "rehearsal" / "pyproject.toml")


def _pins(requirements: list[str], name: str) -> list[str]:
    """The versions `requirements` pin `name` to (`name==V` or `name[extra]==V`)."""
    pin = re.compile(rf"{name}(?:\[[^]]*\])?==(\S+)")
    return [match.group(1) for requirement in requirements if (match := pin.fullmatch(requirement.strip()))]


def test_the_rehearsals_have_the_products_version_and_pin_it() -> None:
    assert REHEARSAL["name"] == "scaler-rehearsal"
    assert REHEARSAL["version"] == __version__
    assert _pins(REHEARSAL["dependencies"], "scaler-compute") == [__version__]


def test_the_rehearsal_extras_install_the_rehearsals_of_this_version() -> None:
    extras = PRODUCT["optional-dependencies"]
    assert {extra: _pins(extras[extra], "scaler-rehearsal") for extra in REHEARSAL_EXTRAS} == {
        extra: [__version__] for extra in REHEARSAL_EXTRAS
    }
    others = {extra for extra, requirements in extras.items() if extra not in REHEARSAL_EXTRAS and extra != "test"}
    assert [extra for extra in sorted(others) if _pins(extras[extra], "scaler-rehearsal")] == []


def test_each_command_is_declared_once_from_its_own_package() -> None:
    product, rehearsal = PRODUCT["scripts"], REHEARSAL["scripts"]
    assert set(product) & set(rehearsal) == set()
    assert {"scaler_fake_cloud", "scaler_fake_kubernetes", "scaler_link"} == set(rehearsal)
    assert all(target.startswith("scaler.entry_points.") for target in product.values())
    assert all(target.startswith("scaler_rehearsal.entry_points.") for target in rehearsal.values())
