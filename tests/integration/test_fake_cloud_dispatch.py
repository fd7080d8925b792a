"""The fake cloud finds each request's service without listing moto's package folder for it
(rehearsal/scaler_rehearsal/fake_cloud/moto_dispatch.py): moto's dispatcher listed its 160-odd service folders at every
request, a quarter of the CPU of answering a short call, and the fake cloud answers every call of the tests and of
the managers they start.

Checked with the mechanism off (`moto_dispatch.install()` left out of `FakeCloud.start`): the call below lists the
folder once.
"""

from __future__ import annotations

import os
from typing import Any

import moto
import pytest

from tests.integration.cloud_harness import cloud_client

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(120)]


def test_an_api_call_does_not_list_motos_service_folders(fake_cloud: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ecs = cloud_client("ecs")
    ecs.list_clusters()  # the client's first call, made before the count
    moto_folder = os.path.dirname(moto.__file__)
    listings: list[str] = []
    listdir = os.listdir

    def counted(path: Any = ".") -> list[str]:
        if os.fspath(path) == moto_folder:
            listings.append(os.fspath(path))
        return listdir(path)

    monkeypatch.setattr(os, "listdir", counted)  # the fake cloud answers in this process
    assert "clusterArns" in ecs.list_clusters()
    assert listings == [], "moto listed its service folders to answer one call"
