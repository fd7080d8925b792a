"""`SchedulerClusterCombo(max_clients=1)`: a real scheduler process refuses a second client at once, naming the
limit, and takes a client again once the first has closed. Checked by hand: without the check in
`Registration._register_client` the second client connects."""

from __future__ import annotations

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.errors import IncompatiblePeerError

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_a_second_client_is_refused_until_the_first_has_closed() -> None:
    with SchedulerClusterCombo(n_workers=1, max_clients=1) as cluster:
        with Client(cluster.get_address()) as first:
            assert first.submit(pow, 2, 5).result(timeout=60) == 32
            with pytest.raises(IncompatiblePeerError, match=r"at most 1 client\(s\) at once .*--max-clients"):
                Client(cluster.get_address(), timeout_seconds=30)
        with Client(cluster.get_address()) as later:
            assert later.submit(pow, 2, 6).result(timeout=60) == 64
