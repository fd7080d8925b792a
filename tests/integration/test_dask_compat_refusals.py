"""What scaler.compat.dask refuses, each by name and saying what to use instead (docs/guide/migrating.md lists them),
and what it accepts with a warning once (options that only tune Dask's own machinery)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scaler.compat import dask as distributed
from scaler.compat import dask_cluster
from scaler.compat.dask import Client
from tests.integration.conftest import running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_dask_compat_refusals"), pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with running_cluster(1) as cluster, Client(cluster.get_address(), set_as_default=False) as opened:
        yield opened


def test_refused_by_name(client: Client) -> None:
    with pytest.raises(NotImplementedError, match=r"workers=\.\.\. is not supported .*resources="):
        client.submit(abs, -1, workers=["tcp://somewhere"])
    with pytest.raises(NotImplementedError, match=r"Client\.native\.actor"):
        client.map(abs, [1], actor=True)
    with pytest.raises(NotImplementedError, match="nanny"):
        client.run(abs, 1, nanny=True)
    with pytest.raises(NotImplementedError, match=r"compute\(retries=\.\.\.\)"):
        client.compute([], retries=2)
    with pytest.raises(NotImplementedError, match=r"\.story\(\)"):
        client.get_task_stream()
    with pytest.raises(ValueError, match="fraction of a resource"):
        client.submit(abs, -1, resources={"GPU": 0.5})
    with pytest.raises(NotImplementedError, match=r"scaler\.AsyncClient"):
        Client(client.native.address, asynchronous=True)
    with pytest.raises(NotImplementedError, match="CURVE"):
        Client(client.native.address, security=object())
    with pytest.raises(NotImplementedError, match="Variable is not supported"):
        distributed.Variable("x")
    with pytest.raises(AttributeError):
        client.publish_dataset  # noqa: B018  (a method of Dask's client that is not there)


def test_tuning_options_warn_once(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_cluster, "_warned", set())
    with pytest.warns(UserWarning, match="fifo_timeout"):
        assert client.submit(abs, -3, fifo_timeout="1s").result() == 3
    assert client.submit(abs, -4, fifo_timeout="1s").result() == 4  # once: no warning (warnings are errors here)
