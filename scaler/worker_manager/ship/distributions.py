"""The distributions installed in this interpreter, as a cloud unit needs to know them.

A distribution installed from a package index (no `direct_url.json` in its dist-info, PEP 610) is *public*: a
unit installs it by `name==version`. Anything else (an editable install, a local path, a VCS or URL install) is
*local*: no index has this copy, so it travels as a wheel built here (`wheels`). This package itself is looked
up the same way (`this_build`): a development install of scaler is local, and units get a wheel of it.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: The name this package is published under (docs/dependencies.md: `scaler` on PyPI is another project).
DISTRIBUTION_NAME = "scaler-compute"
#: Installed by every virtual environment and never shipped: the unit's own copies serve.
TOOLING = frozenset({"pip", "setuptools", "wheel", "distribute", "pkg-resources"})
#: The rehearsals of this package (the `fake-cloud` and `fake-kubernetes` extras install them): they run beside the
#: managers, never on a unit, and no package index has them while the package is not published.
REHEARSALS = frozenset({"scaler-rehearsal"})


@dataclass(frozen=True, slots=True)
class Installed:
    name: str  #: as its metadata spells it
    version: str
    direct_url: str | None  #: where it was installed from when not from an index (PEP 610); None: an index
    editable: bool
    wheel_tags: tuple[str, ...]  #: `Tag:` lines of its WHEEL file (empty for sdist or egg installs)
    import_names: tuple[str, ...]  #: its top-level modules and packages
    distribution: importlib.metadata.Distribution = field(compare=False, repr=False)  #: to read its files

    @property
    def key(self) -> str:
        return canonical_name(self.name)

    @property
    def is_public(self) -> bool:
        return self.direct_url is None

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


def canonical_name(name: str) -> str:
    """PEP 503: `Scaler_Compute` and `scaler.compute` are `scaler-compute`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_distributions() -> list[Installed]:
    """Every distribution this interpreter imports from, first on sys.path first (a shadowed copy is skipped)."""
    found: dict[str, Installed] = {}
    for distribution in importlib.metadata.distributions():
        described = describe(distribution)
        if described is not None:
            found.setdefault(described.key, described)
    return sorted(found.values(), key=lambda item: item.key)


def this_build() -> Installed:
    """The distribution this running scaler comes from."""
    try:
        distribution = importlib.metadata.distribution(DISTRIBUTION_NAME)
    except importlib.metadata.PackageNotFoundError:
        raise LookupError(
            f"this scaler is not installed as the {DISTRIBUTION_NAME} distribution (run `pip install -e .` in its "
            "clone, or `pip install scaler-compute`): the cloud managers ship the installed distribution to units"
        ) from None
    described = describe(distribution)
    if described is None:
        raise LookupError(f"the {DISTRIBUTION_NAME} distribution has no readable metadata")
    return described


def describe(distribution: importlib.metadata.Distribution) -> Installed | None:
    name = distribution.metadata["Name"] if distribution.metadata else None
    if not name:
        return None
    direct_url, editable = _direct_url(distribution)
    return Installed(
        name=str(name),
        version=str(distribution.version),
        direct_url=direct_url,
        editable=editable,
        wheel_tags=_wheel_tags(distribution),
        import_names=_import_names(distribution),
        distribution=distribution,
    )


def _direct_url(distribution: importlib.metadata.Distribution) -> tuple[str | None, bool]:
    text = distribution.read_text("direct_url.json")
    if not text:
        source = _source_tree(distribution)
        return (source.as_uri(), True) if source is not None else (None, False)
    try:
        record = json.loads(text)
    except ValueError:
        return "unreadable direct_url.json", False
    editable = bool(record.get("dir_info", {}).get("editable", False))
    return str(record.get("url", "")), editable


def _source_tree(distribution: importlib.metadata.Distribution) -> Path | None:
    """A development tree: metadata in an .egg-info folder beside the sources (`setup.py develop`, or a clone's
    own egg-info found first because the clone is the working directory), outside any site-packages."""
    if distribution.read_text("PKG-INFO") is None:
        return None
    base = Path(str(distribution.locate_file("")))
    if base.name in ("site-packages", "dist-packages"):
        return None
    return base.resolve()


def _wheel_tags(distribution: importlib.metadata.Distribution) -> tuple[str, ...]:
    text = distribution.read_text("WHEEL") or ""
    return tuple(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:"))


def _import_names(distribution: importlib.metadata.Distribution) -> tuple[str, ...]:
    text = distribution.read_text("top_level.txt")
    if text:
        return tuple(sorted({line.strip() for line in text.splitlines() if line.strip()}))
    names: set[str] = set()
    for file in distribution.files or ():
        parts = Path(str(file)).parts
        if not parts or parts[0].endswith((".dist-info", ".egg-info", ".data")) or parts[0] in ("..", "__pycache__"):
            continue
        top = parts[0]
        if len(parts) == 1:
            if top.endswith(".py"):
                names.add(top[:-3])
            elif top.endswith((".so", ".pyd")):
                names.add(top.split(".", 1)[0])
        elif top.isidentifier():
            names.add(top)
    return tuple(sorted(names))


def this_python() -> str:
    """`3.11`: the major.minor of this interpreter (units run the same, for cloudpickle)."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"
