"""AWS errors the Batch backend meets that moto does not produce (moto enforces no bucket policy): each becomes
an OffloadError naming what failed and the AWS error code. Real boto3 clients answered by botocore's Stubber."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("botocore", reason="boto3 comes with the aws extra (make test installs it)")
from botocore.stub import ANY, Stubber

from scaler.config.sections import AWSHPCWorkerManagerConfig
from scaler.worker_manager.aws.client import AwsClients
from scaler.worker_manager.aws_hpc.batch_backend import BatchBackend
from scaler.worker_manager.offload.backend import OffloadError, RemoteJob


def backend_of(clients: AwsClients) -> BatchBackend:
    settings = AWSHPCWorkerManagerConfig(
        scheduler_address="tcp://127.0.0.1:1", job_queue="q", job_definition="d", s3_bucket="tasks"
    )
    return BatchBackend(settings, clients)


def test_s3_access_denied_on_a_large_payload_names_the_object_and_the_code(clients: AwsClients) -> None:
    backend = backend_of(clients)
    with Stubber(clients["s3"]) as s3:
        expected = {"Bucket": "tasks", "Key": ANY, "Body": ANY}
        s3.add_response("put_object", {}, expected)  # the jobs' lease
        s3.add_client_error("put_object", service_error_code="AccessDenied", service_message="Access Denied",
                            http_status_code=403, expected_params=expected)  # fmt: skip
        with pytest.raises(OffloadError) as raised:
            backend.submit([RemoteJob("BAT-u-1", os.urandom(40_000))])  # over the inline limit: through S3
    text = str(raised.value)
    assert "s3://tasks/scaler-tasks/inputs/BAT-u-1.bin" in text and "AccessDenied" in text
    assert "IAM permission" in text  # the advice for permission errors


def test_a_refused_submission_names_the_batch_error(clients: AwsClients) -> None:
    backend = backend_of(clients)
    with Stubber(clients["batch"]) as batch, Stubber(clients["s3"]) as s3:
        s3.add_response("put_object", {}, {"Bucket": "tasks", "Key": "scaler-tasks/leases/BAT-u", "Body": b""})
        batch.add_client_error("submit_job", service_error_code="ClientException",
                               service_message="Job queue q does not exist", http_status_code=400)  # fmt: skip
        with pytest.raises(OffloadError, match="ClientException: Job queue q does not exist"):
            backend.submit([RemoteJob("BAT-u-2", b"small")])


def test_a_lease_that_cannot_be_written_names_it_and_submits_nothing(clients: AwsClients) -> None:
    backend = backend_of(clients)
    with Stubber(clients["s3"]) as s3, Stubber(clients["batch"]):  # no submit_job expected
        s3.add_client_error("put_object", service_error_code="AccessDenied", service_message="Access Denied",
                            http_status_code=403)  # fmt: skip
        with pytest.raises(OffloadError) as raised:
            backend.submit([RemoteJob("BAT-u-3", b"small")])
    assert "lease s3://tasks/scaler-tasks/leases/BAT-u" in str(raised.value) and "AccessDenied" in str(raised.value)
