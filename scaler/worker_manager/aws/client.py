"""boto3 for the AWS backends: one session per manager, every call off the event loop, errors made plain.

boto3 finds `AWS_ENDPOINT_URL` on its own, so the same code talks to AWS or to `scaler_fake_cloud`. Calls run
in a worker thread (`await aws.call(client.run_task, ...)`): a slow API never delays the manager's heartbeat.
botocore retries throttling and transient errors with back-off ("standard" retry mode); what is left is raised
as a `CloudError` whose message names the AWS error code and what to do about it.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")

#: Error codes by what the user has to do; the message of a CloudError says which.
CREDENTIAL_CODES = frozenset(
    {"UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException", "AuthFailure",
     "SignatureDoesNotMatch", "InvalidAccessKeyId", "MissingAuthenticationToken"}
)  # fmt: skip
PERMISSION_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
QUOTA_CODES = frozenset(
    {"LimitExceeded", "LimitExceededException", "InstanceLimitExceeded", "VcpuLimitExceeded",
     "InsufficientInstanceCapacity", "ServiceQuotaExceededException"}
)  # fmt: skip


class CloudError(Exception):
    """An AWS call that failed for a reason retrying will not fix by itself."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class AwsClients:
    """boto3 clients of one region, with credentials from the settings or the default chain."""

    def __init__(
        self,
        region: str,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        endpoint_url: str | None = None,
        profile: str | None = None,
    ) -> None:
        import boto3
        import botocore.config
        import botocore.session

        core = botocore.session.get_session()
        core.register_component("data_loader", _shared_loader())
        known = core.get_available_regions("ec2")
        if region not in known:
            regions = ", ".join(known)
            raise CloudError("UnknownRegion", f"unknown AWS region {region!r} (--aws-region); AWS has {regions}")
        self._session = boto3.session.Session(
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            region_name=region,
            profile_name=profile,
            botocore_session=core,
        )
        self._config = botocore.config.Config(retries={"mode": "standard", "max_attempts": 5})
        self._endpoint_url = endpoint_url
        self._clients: dict[str, Any] = {}
        self.region = region

    def call_now(self, service: str, operation: str, **kwargs: Any) -> Any:
        """A blocking call, for start-up before any event loop runs; errors as in `call`."""
        try:
            return getattr(self[service], operation)(**kwargs)
        except Exception as error:
            raise plain_error(error) from error

    def __getitem__(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            client = self._clients[service] = self._session.client(
                service, config=self._config, endpoint_url=self._endpoint_url
            )
        return client


@functools.cache
def _shared_loader() -> Any:
    """botocore's reader of its JSON models (endpoints, services), shared by every session of this process: it keeps
    what it parsed, where each new session parsed it again (a large part of a new manager's or backend's CPU)."""
    import botocore.loaders

    return botocore.loaders.create_loader()


async def call(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """`function(*args, **kwargs)` in a worker thread; botocore errors become CloudError with a clear message."""
    try:
        return await asyncio.to_thread(functools.partial(function, *args, **kwargs))
    except Exception as error:
        raise plain_error(error) from error


def plain_error(error: BaseException) -> BaseException:
    """The CloudError a botocore exception stands for; other exceptions unchanged."""
    import botocore.exceptions as failures

    if isinstance(error, failures.ClientError):
        details = error.response.get("Error", {})
        code, text = str(details.get("Code", "Unknown")), str(details.get("Message", error))
        if code.isdigit():  # an XML error body where JSON was expected (moto's authentication failures)
            code, text = _xml_error(text) or (f"HTTP{code}", text)
        return CloudError(code, f"AWS error {code}: {text}{_advice(code)}")
    if isinstance(error, failures.NoCredentialsError):
        return CloudError(
            "NoCredentials",
            "no AWS credentials: set --aws-access-key-id/--aws-secret-access-key, the AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY environment variables, or an AWS profile",
        )
    if isinstance(error, failures.EndpointConnectionError):
        return CloudError("EndpointConnectionError", f"cannot reach the AWS endpoint: {error}")
    return error


def _xml_error(body: str) -> tuple[str, str] | None:
    code = re.search(r"<Code>([^<]+)</Code>", body)
    message = re.search(r"<Message>([^<]*)</Message>", body)
    if code is None:
        return None
    return code.group(1), message.group(1) if message else body


def _advice(code: str) -> str:
    if code in CREDENTIAL_CODES:
        return " (the AWS credentials are wrong or expired: check the access key settings or the AWS profile)"
    if code in PERMISSION_CODES:
        return (
            " (the credentials lack an IAM permission: `scaler --docs worker_managers` lists the actions each manager "
            "needs)"
        )
    if code in QUOTA_CODES:
        return " (an AWS quota is reached: lower --max-task-concurrency or ask AWS for a higher quota)"
    return ""
