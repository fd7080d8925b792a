"""Dask's own `GetFunctionTestMixin` (`dask.utils_test`: "can be imported and used to test foreign implementations
of the get function specification") against our Dask-conformant get, `client.dask_get`, on one local cluster.

The mixin is Dask's, unchanged: as its docstring says, a subclass sets `get`; ours calls `dask_get` of the module's
client (the client exists only once the cluster does, so `get` looks it up when called).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dask.utils_test import GetFunctionTestMixin

from scaler import Client
from tests.conformance.summary import measured
from tests.integration.conftest import running_cluster

#: one cluster for the module, its tests in one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("conformance_dask"), pytest.mark.timeout(120)]

_client: list[Client] = []


def module_get(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    """Dask's get protocol, `get(dsk, keys, **kwargs)`, on the module's client."""
    return _client[0].dask_get(dsk, keys, **kwargs)


@pytest.fixture(scope="module", autouse=True)
def _cluster() -> Iterator[None]:
    with measured("dask"), running_cluster(2) as cluster, Client(address=cluster.get_address()) as client:
        _client.append(client)
        try:
            yield
        finally:
            _client.clear()


class TestDaskGet(GetFunctionTestMixin):  # type: ignore[misc]
    get = staticmethod(module_get)
