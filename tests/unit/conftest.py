"""Fixtures shared by the pure tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import zmq


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Any:
    """boto3 clients for botocore's Stubber: test credentials, no endpoint (nothing is sent anywhere)."""
    pytest.importorskip("botocore", reason="boto3 comes with the aws extra (make test installs it)")
    from scaler.worker_manager.aws.client import AwsClients

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return AwsClients("us-east-1")


@pytest.fixture
def pair() -> Iterator[tuple[zmq.Socket[Any], zmq.Socket[Any]]]:
    """A ROUTER and a DEALER (identity b"peer") connected over inproc, closed after the test."""
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.bind("inproc://unit-router-dealer")
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.IDENTITY, b"peer")
    dealer.connect("inproc://unit-router-dealer")
    try:
        yield router, dealer
    finally:
        dealer.close(linger=0)
        router.close(linger=0)
        context.term()


@pytest.fixture
def no_scaler_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own SCALER_* variables do not leak into a test of the settings' sources."""
    for name in list(os.environ):
        if name.upper().startswith("SCALER_"):
            monkeypatch.delenv(name)
