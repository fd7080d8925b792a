"""What moto costs the fake cloud in CPU, cut without changing what the cloud answers.

Measured in the test suite (py-spy on the process that hosts the cloud), two thirds of the cloud's own CPU went to
two things no caller sees:
- a reset (`/moto-api/reset`, between tests) first rebuilt every backend in use, then dropped them all, to be built
  again lazily at the next request; the rebuild is dropped unseen. Now the backends are dropped at once, and only
  those whose reset releases something (S3 closes its keys' temporary files, Batch stops its jobs' threads) get it;
- every IAM backend (one per partition and account: the first request after a reset makes six, looking the caller's
  access key up in every partition) parsed AWS's 1,500-odd managed policies from their JSON text. Now the text is
  parsed once per process, and the policies are loaded in the commercial partition (`aws`) only: the fake cloud's
  regions are AWS's commercial ones, as the managers' own region check is.

`install()` patches moto's classes and returns what undoes it (`FakeCloud.stop`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

#: The partition whose IAM has AWS's managed policies.
POLICY_PARTITION = "aws"


def install() -> Callable[[], None]:
    from moto.core.base_backend import BackendDict
    from moto.iam.models import IAMBackend

    original_reset = BackendDict.__dict__["reset"]
    original_policies = IAMBackend._init_aws_policies
    BackendDict.reset = classmethod(_reset)  # type: ignore[method-assign, assignment]
    IAMBackend._init_aws_policies = _aws_policies  # type: ignore[method-assign]

    def undo() -> None:
        BackendDict.reset = original_reset  # type: ignore[method-assign]
        IAMBackend._init_aws_policies = original_policies  # type: ignore[method-assign]

    return undo


def _reset(backend_dict: Any) -> None:
    """moto's `BackendDict.reset`, less the rebuild of each backend that is dropped right after."""
    from moto.core.base_backend import BackendDict, BaseBackend, backend_lock

    services: list[Any] = BackendDict._instances  # type: ignore[misc]
    with backend_lock:
        for service in services:
            for account in service.values():
                for regional in account.values():
                    if type(regional).reset is not BaseBackend.reset:
                        regional.reset()  # what it holds (files, threads) is released
            service.clear()
        services.clear()


def _aws_policies(self: Any) -> list[Any]:
    """`IAMBackend._init_aws_policies`: the parsed managed policies, in the commercial partition only."""
    from moto.iam.models import AWSManagedPolicy
    from moto.settings import load_iam_aws_managed_policies

    if not load_iam_aws_managed_policies() or self.partition != POLICY_PARTITION:
        return []
    return [
        AWSManagedPolicy.from_data(name, self.account_id, self.region_name, data)
        for name, data in _managed_policies().items()
    ]


@functools.cache
def _managed_policies() -> dict[str, Any]:
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    parsed: dict[str, Any] = json.loads(aws_managed_policies_data)
    return parsed
