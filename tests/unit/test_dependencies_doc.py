"""docs/dependencies.md names every package each extra of pyproject.toml installs, in that extra's rows of its
table, so a reader knows what `pip install "scaler-compute[EXTRA]"` brings (checked by hand: the page left out uv
and packaging of `fake-cloud`, packaging of `aws`, pre-commit and codespell of `dev` and eight packages of `test`,
and this test failed naming them)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

REPOSITORY = Path(__file__).resolve().parents[2]
PAGE = REPOSITORY / "docs" / "dependencies.md"


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503): `moto[ec2]==5.2.5; ...` -> `moto`."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name is not None, f"not a requirement: {requirement!r}"
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def documented_packages(page: str) -> dict[str, set[str]]:
    """Extra -> the normalised names in the package column of its rows (an extra may have several rows)."""
    packages: dict[str, set[str]] = {}
    for extra, column in re.findall(r"^\| `([\w-]+)` \| ([^|]*) \|", page, flags=re.MULTILINE):
        words = re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.sub(r"\[[^]]*\]|\([^)]*\)", "", column))
        packages.setdefault(extra, set()).update(_name(word) for word in words)
    return packages


def test_every_package_of_every_extra_is_named_in_its_rows() -> None:
    extras = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    documented = documented_packages(PAGE.read_text())
    missing = {
        extra: sorted({_name(requirement) for requirement in requirements} - documented.get(extra, set()))
        for extra, requirements in extras.items()
    }
    missing = {extra: names for extra, names in missing.items() if names}
    assert missing == {}, f"docs/dependencies.md does not name these packages of these extras: {missing}"
