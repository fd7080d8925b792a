"""The lease of an aws_hpc job (`job_lease`) and the job definition's Python check: pure parts, no cloud."""

from __future__ import annotations

import datetime

from scaler.worker_manager.aws_hpc.batch_backend import _definition_python_problem
from scaler.worker_manager.aws_hpc.job_lease import (
    LEASE_KEY_VARIABLE,
    LEASE_SECONDS_VARIABLE,
    LeaseKeeper,
    check_interval,
    lease_age_beyond,
)
from scaler.worker_manager.ship.distributions import this_python

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)


def test_a_lease_renewed_within_its_length_holds() -> None:
    assert lease_age_beyond(NOW - datetime.timedelta(seconds=30), NOW, 60) is None


def test_a_lease_older_than_its_length_names_its_age() -> None:
    reason = lease_age_beyond(NOW - datetime.timedelta(seconds=90), NOW, 60)
    assert reason is not None and "90 s ago" in reason and "60 s" in reason


def test_a_missing_lease_object_means_the_manager_stopped() -> None:
    reason = lease_age_beyond(None, NOW, 60)
    assert reason is not None and "gone" in reason


def test_a_running_job_looks_at_its_lease_at_most_a_minute_apart() -> None:
    assert check_interval(3600) == 60 and check_interval(20) == 5 and check_interval(1) == 1


def test_the_keeper_writes_at_most_every_quarter_lease_unless_forced() -> None:
    writes: list[int] = []
    keeper = LeaseKeeper("bucket/prefix/leases/BAT-1", 400, lambda: writes.append(1))
    keeper.renew()
    keeper.renew()
    assert len(writes) == 1
    keeper.renew(force=True)
    assert len(writes) == 2
    variables = {item["name"]: item["value"] for item in keeper.variables()}
    assert variables == {LEASE_KEY_VARIABLE: "bucket/prefix/leases/BAT-1", LEASE_SECONDS_VARIABLE: "400"}


def definition(version: str | None) -> dict[str, object]:
    environment = [] if version is None else [{"name": "PYTHON_VERSION", "value": version}]
    return {"containerProperties": {"environment": environment}}


def test_a_job_definition_of_another_python_is_refused_naming_both_versions() -> None:
    other = "3.9" if this_python() != "3.9" else "3.10"
    problem = _definition_python_problem(definition(other), "scaler-batch-job")
    assert problem is not None and other in problem and this_python() in problem and "scaler-batch-job" in problem


def test_a_job_definition_of_the_clients_python_or_none_is_accepted() -> None:
    assert _definition_python_problem(definition(this_python()), "d") is None
    assert _definition_python_problem(definition(None), "d") is None
