"""Fixtures shared by the pure tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Any:
    """boto3 clients for botocore's Stubber: test credentials, no endpoint (nothing is sent anywhere)."""
    pytest.importorskip("botocore", reason="boto3 comes with the aws extra (make test installs it)")
    from scaler.worker_manager.aws.client import AwsClients

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return AwsClients("us-east-1")
