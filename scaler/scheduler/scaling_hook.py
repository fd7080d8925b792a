"""Connects the scaling policies (`scaler.policy`) to the scheduler core.

Placeholder until the policy package lands: parses the allocation half of the policy content and
returns no scaling hook (managers then receive no targets).
"""

from __future__ import annotations

from scaler.scheduler.core.scheduler_core import ScalingHook


def allocation_policy(engine_type: str, content: str) -> str:
    if engine_type == "waterfall_v1":
        return "capability"
    for item in content.split(";"):
        key, sep, value = item.partition("=")
        if sep and key.strip() == "allocate":
            return value.strip()
    return "even_load"


def make_scaling_hook(engine_type: str, content: str) -> ScalingHook | None:
    return None
