"""What the ECS and EC2 managers share about their units: the checks made when the manager starts (before
anything is launched), the shipment built from the settings, and boot reports folded into the units' details."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from scaler.config.sections import CloudUnitSettings
from scaler.worker_manager.aws.bucket import ManagerBucket
from scaler.worker_manager.aws.client import AwsClients
from scaler.worker_manager.aws.shipping import Shipment, describe_report
from scaler.worker_manager.backend import UnitInfo
from scaler.worker_manager.ship.distributions import this_python
from scaler.worker_manager.ship.environment import (
    EnvironmentProblem,
    IndexCheck,
    PublishedCheck,
    UnitEnvironment,
    check_environment,
    plan_environment,
)
from scaler.worker_manager.ship.index_check import on_index, unavailable
from scaler.worker_manager.ship.unit_target import UnitTarget, python_version_problem

logger = logging.getLogger(__name__)


def unit_environment(
    config: CloudUnitSettings, requirements_text: str | None, published: PublishedCheck | None = None
) -> UnitEnvironment:
    """The units' environment these settings describe; this build goes by pin only when `published` finds it on the
    package index (without the question, as a wheel). Raises EnvironmentProblem."""
    return plan_environment(
        config.environment, requirements_text, config.environment_exclude, UnitTarget(this_python()),
        published=published,
    )  # fmt: skip


def start_problem(
    config: CloudUnitSettings,
    python_setting: str,
    python_value: str | None,
    requirements_text: str | None,
    index: IndexCheck = unavailable,
    published: PublishedCheck = on_index,
) -> tuple[str | None, UnitEnvironment | None]:
    """Why the manager must not start (a Python version other than the client's, a package the units could not
    install), or None, with the units' environment."""
    problem = python_version_problem(python_setting, python_value)
    if problem is not None:
        return problem, None
    try:
        environment = unit_environment(config, requirements_text, published)
    except EnvironmentProblem as error:
        return str(error), None
    problems = check_environment(environment, index)
    if problems:
        return (
            "the units could not install their environment, so nothing is launched: " + "; ".join(problems)
            + (" (environment = sync ships what is installed here: environment_exclude leaves a distribution out)"
               if config.environment == "sync" else "")
        ), None  # fmt: skip
    logger.info("%s", environment.summary())
    return None, environment


def make_shipment(
    config: CloudUnitSettings,
    clients: AwsClients,
    manager_id: str,
    boot_timeout_seconds: float,
    environment: UnitEnvironment | None,
    requirements_text: str | None,
) -> Shipment:
    """The manager's shipment (its environment planned now when the caller has not: a backend used on its own)."""
    if environment is None:
        environment = unit_environment(config, requirements_text, on_index)
    return Shipment(ManagerBucket(clients, config.s3_bucket), environment, manager_id, boot_timeout_seconds)


async def with_reports(shipment: Shipment, units: Sequence[UnitInfo], now: float) -> list[UnitInfo]:
    """The units, each with what its boot report says put before its detail (the cloud's own words, such as an
    exit code, come after what the unit said failed)."""
    watched = [unit.unit_id for unit in units if unit.is_alive]
    gone = [unit.unit_id for unit in units if not unit.is_alive]
    reports = await shipment.reports(watched, now, gone)
    described = []
    for unit in units:
        report = reports.get(unit.unit_id)
        if report is not None:
            unit = dataclasses.replace(unit, detail=f"{describe_report(report)}; {unit.detail}".strip("; "))
        described.append(unit)
    return described
