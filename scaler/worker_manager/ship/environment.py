"""What every unit of a cloud manager installs when it boots, decided once when the manager starts.

`environment` (a setting of the cloud managers) says what:

- `sync` (the default): this build of scaler, and the environment the manager runs in (the laptop's): every
  distribution installed here but the tools and scaler's rehearsals, public ones pinned to their version
  (`name==version`, installed from the package index), local ones (editable, path or VCS installs) as wheels made
  here; plus the explicit requirements, if any; minus `environment_exclude`. The modules of the client's working
  directory travel with its tasks instead (the client pickles them by value; docs/guide/bursting.md).
- `requirements`: this build of scaler and the explicit requirements only (names, pins, `name @ URL`, local
  wheel files).
- `image`: nothing; the image (or AMI) has scaler and everything the tasks import.

This build of scaler goes by pin (`scaler-compute==<version>`) only when the package index verifiably has that
version (`published`, asked with pip); otherwise, and whenever the question cannot be put, units get a wheel of
this build. A wheel installed with `--find-links` leaves no record of where it came from, as one from the index
does not: only the index can say whether it is published (the package is not on PyPI yet).

`check_environment` finds what a unit could not install before anything is launched: a local wheel built for
another Python or platform, a pin or requirement the package index has no file of for the units (asked with
pip, `index_check`). Distributions installed here from a wheel that fits the units need no question: the index
had that very file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scaler.worker_manager.ship.distributions import (
    REHEARSALS,
    TOOLING,
    Installed,
    canonical_name,
    installed_distributions,
    this_build,
)
from scaler.worker_manager.ship.unit_target import UnitTarget
from scaler.worker_manager.ship.wheels import Wheel, WheelError, wheel_of, wheel_of_file

logger = logging.getLogger(__name__)

ENVIRONMENT_MODES = ("sync", "requirements", "image")

#: (requirements, target) -> [(requirement, why the index has nothing for the units)]
IndexCheck = Callable[[Sequence[str], UnitTarget], list[tuple[str, str]]]
#: (a pin, target) -> whether the package index verifiably has it for the units
PublishedCheck = Callable[[str, UnitTarget], bool]


class EnvironmentProblem(ValueError):
    """The units' environment cannot be made; the message names the package and says why."""


@dataclass(frozen=True)
class UnitEnvironment:
    mode: str
    target: UnitTarget
    #: how a unit gets this build of scaler: a requirement (`scaler-compute==X`), else `scaler_wheel`; both None
    #: in `image` mode (the image has it)
    scaler: str | None
    scaler_wheel: Wheel | None
    requirements: tuple[str, ...]  #: installed from the package index, in this order
    wheels: tuple[Wheel, ...]  #: made here, shipped through the manager's bucket
    #: (requirement or distribution, the modules it provides): a unit that cannot install one makes those
    #: modules raise an ImportError naming it, so that the tasks that need it say why
    import_names: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: public pins whose installed wheel fits the units (no index question needed)
    trusted: frozenset[str] = frozenset()

    def summary(self) -> str:
        if self.mode == "image":
            return "environment = image: units install nothing (the image has scaler and the tasks' packages)"
        how = "a wheel of this build" if self.scaler_wheel is not None else self.scaler
        return (
            f"environment = {self.mode}: units run Python {self.target.python} with {how}, "
            f"{len(self.requirements)} requirement(s) from the package index and {len(self.wheels)} local wheel(s)"
        )


def parse_requirements(text: str | None) -> list[str]:
    """Requirements separated by `;` or new lines (`#` starts a comment); a path to an existing file is read."""
    if not text:
        return []
    path = Path(text.strip())
    if "\n" not in text and ";" not in text and path.suffix != ".whl" and path.is_file():
        text = path.read_text()
    lines = [line.split(" #", 1)[0].strip() for line in text.replace(";", "\n").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def plan_environment(
    mode: str,
    requirements_text: str | None,
    exclude_text: str,
    target: UnitTarget,
    cache: Path | None = None,
    installed: Sequence[Installed] | None = None,
    published: PublishedCheck | None = None,
) -> UnitEnvironment:
    """The units' environment for these settings. `published` says whether this build's version is on the package
    index (None: not asked, and a wheel of it is shipped). Raises EnvironmentProblem."""
    if mode not in ENVIRONMENT_MODES:
        raise EnvironmentProblem(f"environment {mode!r}: expected one of {', '.join(ENVIRONMENT_MODES)}")
    if mode == "image":
        return UnitEnvironment(mode, target, None, None, (), ())
    build = this_build()
    scaler, scaler_wheel = _this_scaler(build, target, cache, published)
    requirements: list[str] = []
    wheels: list[Wheel] = []
    names: list[tuple[str, tuple[str, ...]]] = []
    trusted: set[str] = set()
    if mode == "sync":
        synced = _synced(exclude_text, build, installed if installed is not None else installed_distributions())
        for item in synced:
            if item.is_public:
                requirements.append(item.pin)
                names.append((item.pin, item.import_names))
                if item.wheel_tags and target.fits_installed(item.wheel_tags):
                    trusted.add(item.pin)
            else:
                try:
                    wheels.append(wheel_of(item, cache))
                except WheelError as error:
                    raise EnvironmentProblem(f"{error} (environment = sync ships local installs as wheels)") from None
    for requirement in parse_requirements(requirements_text):
        if requirement.endswith(".whl") and "@" not in requirement:
            try:
                wheels.append(wheel_of_file(Path(requirement).expanduser(), cache))
            except WheelError as error:
                raise EnvironmentProblem(str(error)) from None
            continue
        requirements.append(requirement)
        names.append((requirement, (_module_guess(requirement),)))
    return UnitEnvironment(
        mode, target, scaler, scaler_wheel, tuple(requirements), tuple(wheels), tuple(names), frozenset(trusted)
    )


def _this_scaler(
    build: Installed, target: UnitTarget, cache: Path | None, published: PublishedCheck | None
) -> tuple[str | None, Wheel | None]:
    """How the units get this build: its pin when the package index has it, else a wheel of it."""
    if build.is_public and published is not None and published(build.pin, target):
        return build.pin, None
    if build.is_public:
        logger.info(
            "%s was installed from a wheel with no record of where it came from (a --find-links folder?) and the "
            "package index does not have it for the units: they get a wheel of this build", build.pin,
        )  # fmt: skip
    try:
        return None, wheel_of(build, cache)
    except WheelError as error:
        raise EnvironmentProblem(str(error)) from None


def _synced(exclude_text: str, build: Installed, installed: Sequence[Installed]) -> list[Installed]:
    """What `sync` ships: every installed distribution but this build, the tools, the rehearsals and the excluded
    ones."""
    excluded = {canonical_name(name) for name in exclude_text.replace(";", ",").split(",") if name.strip()}
    return [item for item in installed if item.key not in excluded | TOOLING | REHEARSALS and item.key != build.key]


def check_environment(environment: UnitEnvironment, index: IndexCheck) -> list[str]:
    """What the units could not install, each naming the package and why; [] when everything fits."""
    target = environment.target
    problems = []
    for wheel in ([environment.scaler_wheel] if environment.scaler_wheel else []) + list(environment.wheels):
        problem = target.wheel_problem(wheel.path)
        if problem is not None:
            problems.append(f"{wheel.distribution} {wheel.version}: {problem}")
    problems += [problem for item in environment.requirements if (problem := direct_reference_problem(item))]
    asked = [environment.scaler] if environment.scaler else []
    asked += [item for item in environment.requirements if item not in environment.trusted and " @ " not in item]
    for requirement, why in index(asked, target) if asked else []:
        problems.append(f"{requirement}: {why}")
    return problems


def direct_reference_problem(requirement: str) -> str | None:
    """`NAME @ URL` of a wheel whose file names another distribution (pip and uv refuse it on the unit, after its
    boot has been paid for), e.g. `scaler @ .../scaler_compute-0.1.0-py3-none-any.whl`; None when it fits."""
    name, at, url = requirement.partition(" @ ")
    file_name = url.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1]
    if not at or not file_name.endswith(".whl") or file_name.count("-") < 4:
        return None
    wanted = canonical_name(name.split("[", 1)[0].strip())
    found = canonical_name(file_name.split("-", 1)[0])
    if wanted == found:
        return None
    return f"{requirement}: the wheel {file_name} is of {found}, not {wanted} (write `{found} @ ...`)"


def _module_guess(requirement: str) -> str:
    """The module a requirement most likely provides (its name with `_`), for the failure stubs."""
    name = requirement
    for separator in ("@", "[", "=", "<", ">", "!", "~", ";", " "):
        name = name.split(separator, 1)[0]
    return name.strip().replace("-", "_").replace(".", "_").lower()
