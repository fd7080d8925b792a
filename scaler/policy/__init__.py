"""Scaling policies: a frozen snapshot of the cluster in, a target per worker manager out.

Public surface: capability strings (`parse_capabilities`, `format_capabilities`), the snapshot and
decision values, the `ScalingPolicy` protocol and `make_policy`. Policies are replayed against traces by
`scaler.policy_simulator` (the real scheduler core and reconcilers, a layer above this package).
"""

from __future__ import annotations

from scaler.policy.capability import covers, format_capabilities, parse_capabilities
from scaler.policy.decision import ScalingDecision, ScalingMemory, ScalingStep
from scaler.policy.protocols import ScalingPolicy
from scaler.policy.registry import (
    DEFAULT_ENGINE_TYPE,
    DEFAULT_POLICY_CONTENT,
    ENGINE_TYPES,
    ResolvedPolicy,
    make_policy,
)
from scaler.policy.snapshot import ManagerView, ScalingSnapshot, TaskGroup, WorkerView

__all__ = [
    "DEFAULT_ENGINE_TYPE",
    "DEFAULT_POLICY_CONTENT",
    "ENGINE_TYPES",
    "ManagerView",
    "ResolvedPolicy",
    "ScalingDecision",
    "ScalingMemory",
    "ScalingPolicy",
    "ScalingSnapshot",
    "ScalingStep",
    "TaskGroup",
    "WorkerView",
    "covers",
    "format_capabilities",
    "make_policy",
    "parse_capabilities",
]
