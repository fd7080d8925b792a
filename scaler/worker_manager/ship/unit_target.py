"""The Python and platform of a cloud unit, and whether a wheel or a Python version fits it.

Units are Linux x86_64 (ECS tasks run the X86_64 runtime platform; EC2 instances boot x86_64 AMIs) with a glibc
at least as new as Amazon Linux 2023's (2.34), and run the client's Python major.minor: functions and results
travel pickled, and cloudpickle's output is only read by the same minor version.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from functools import cached_property
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags, parse_tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from scaler.worker_manager.ship.distributions import this_python

#: glibc of Amazon Linux 2023 (EC2's default AMI); Debian 12, the worker image's base, has 2.36.
UNIT_GLIBC_MINOR = 34
PLATFORM = "Linux x86_64"


@dataclass(frozen=True)
class UnitTarget:
    python: str  #: "3.11"

    @property
    def version(self) -> tuple[int, int]:
        major, minor = self.python.split(".")
        return int(major), int(minor)

    @cached_property
    def tags(self) -> frozenset[Tag]:
        platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(UNIT_GLIBC_MINOR, 4, -1)]
        platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
        found = set(cpython_tags(self.version, platforms=platforms))
        found.update(compatible_tags(self.version, platforms=platforms))
        return frozenset(found)

    def fits_tag(self, tag: str) -> bool:
        """Whether a wheel tag (compressed sets such as `py2.py3-none-any` included) installs on the unit."""
        try:
            return bool(parse_tag(tag) & self.tags)
        except ValueError:
            return False

    def fits_installed(self, tags: tuple[str, ...]) -> bool:
        """Whether a distribution installed here from a wheel with these tags is on an index for the unit too: a
        pure or manylinux wheel of a matching Python is (a `linux_x86_64` wheel was built here, not downloaded)."""
        return any(self.fits_tag(tag) and "linux_x86_64" not in tag.split("-")[-1].split(".") for tag in tags)

    def wheel_problem(self, path: Path) -> str | None:
        """Why the unit's pip would refuse this wheel file (its tags, its Requires-Python), or None."""
        try:
            _name, _version, _build, tags = parse_wheel_filename(path.name)
        except InvalidWheelFilename as error:
            return f"{path.name}: not a wheel file name ({error})"
        if not tags & self.tags:
            shown = ", ".join(sorted(str(tag) for tag in tags))
            return (f"{path.name} is built for {shown}, which the units' Python {self.python} on {PLATFORM} cannot "
                    "install")  # fmt: skip
        requires = _requires_python(path)
        if requires:
            try:
                allowed = SpecifierSet(requires)
            except InvalidSpecifier:
                return None
            if not allowed.contains(f"{self.python}.99"):
                return f"{path.name} requires Python {requires}; the units run Python {self.python}"
        return None


def _requires_python(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            name = next((item for item in archive.namelist() if item.endswith(".dist-info/METADATA")), None)
            if name is None:
                return ""
            headers = HeaderParser().parsestr(archive.read(name).decode(errors="replace"))
    except (OSError, zipfile.BadZipFile):
        return ""
    return str(headers.get("Requires-Python") or "")


def python_version_problem(setting: str, value: str | None) -> str | None:
    """Why the Python version a manager's settings name cannot be used (it must be this Python's major.minor,
    which is the client's), or None. An empty value means "this Python's"."""
    if not value:
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", value.strip())
    if match is None:
        return f"{setting} {value!r}: expected a Python version such as {this_python()}"
    asked = f"{match.group(1)}.{match.group(2)}"
    if asked != this_python():
        return (
            f"{setting} {value} differs from the client's Python {this_python()} (this manager runs with it): the "
            f"workers must run the same Python major.minor as the clients, whose functions and results travel "
            f"pickled; leave {setting} unset to use {this_python()}, or run the clients and the manager with Python "
            f"{asked}"
        )
    return None
