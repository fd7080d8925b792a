"""Scaling policies: a frozen snapshot of the cluster in, a target per worker manager out.

Public surface: capability strings (`parse_capabilities`, `format_capabilities`), the snapshot and
decision values, the `ScalingPolicy` protocol and `make_policy`. Policies are replayed against traces by
`scaler.policy_simulator` (the real scheduler core and reconcilers, a layer above this package).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaler.lazy_exports import lazy_exports

if TYPE_CHECKING:
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

#: The public surface, imported when first used: a process that needs one module of the package (a worker pool reads
#: capability strings) does not import every policy.
_LAZY = {
    "covers": "scaler.policy.capability",
    "format_capabilities": "scaler.policy.capability",
    "parse_capabilities": "scaler.policy.capability",
    "ScalingDecision": "scaler.policy.decision",
    "ScalingMemory": "scaler.policy.decision",
    "ScalingStep": "scaler.policy.decision",
    "ScalingPolicy": "scaler.policy.protocols",
    "DEFAULT_ENGINE_TYPE": "scaler.policy.registry",
    "DEFAULT_POLICY_CONTENT": "scaler.policy.registry",
    "ENGINE_TYPES": "scaler.policy.registry",
    "ResolvedPolicy": "scaler.policy.registry",
    "make_policy": "scaler.policy.registry",
    "ManagerView": "scaler.policy.snapshot",
    "ScalingSnapshot": "scaler.policy.snapshot",
    "TaskGroup": "scaler.policy.snapshot",
    "WorkerView": "scaler.policy.snapshot",
}


__getattr__ = lazy_exports(__name__, _LAZY, globals())


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
