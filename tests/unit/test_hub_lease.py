"""The cloud hub's lease (scaler/cluster/hub_unit.py): it ends once no worker manager has been connected for its
lease, and waits for its first manager at least FIRST_MANAGER_SECONDS, however short the lease. A lease shorter than
a busy laptop's start of its manager (the suite's hub tests run 20 s leases) otherwise ended a hub as its first manager
was connecting; with `lease_over` comparing against the lease alone, the first-manager test fails."""

from __future__ import annotations

import pytest

from scaler.cluster.hub_unit import FIRST_MANAGER_SECONDS, lease_over

pytestmark = pytest.mark.timeout(30)


def test_a_hub_waits_for_its_first_manager_longer_than_a_short_lease() -> None:
    assert not lease_over(21.0, 20.0, manager_seen=False)
    assert not lease_over(FIRST_MANAGER_SECONDS, 20.0, manager_seen=False)
    assert lease_over(FIRST_MANAGER_SECONDS + 1, 20.0, manager_seen=False)


def test_once_a_manager_came_the_lease_alone_counts() -> None:
    assert not lease_over(20.0, 20.0, manager_seen=True)
    assert lease_over(21.0, 20.0, manager_seen=True)


def test_a_lease_longer_than_the_first_managers_wait_is_kept_for_the_first_too() -> None:
    assert not lease_over(299.0, 300.0, manager_seen=False)
    assert lease_over(301.0, 300.0, manager_seen=False)
