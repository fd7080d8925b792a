"""Policy engine type + policy content -> the allocation name and the scaling policy to run.

This is the only place that knows which names map to which policy classes. The scheduler calls
`make_policy` once at start-up; a `ValueError` from it is a configuration error to show the user as is.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.content import Allocation, parse_simple_content, parse_waterfall_content
from scaler.policy.protocols import ScalingPolicy
from scaler.policy.scaling import (
    CapabilityScaling,
    CostScaling,
    NoScaling,
    VanillaScaling,
    WaterfallScaling,
    WorkScaling,
)

ENGINE_TYPES = ("simple", "waterfall_v1")
DEFAULT_ENGINE_TYPE = "simple"
DEFAULT_POLICY_CONTENT = "allocate=capability; scaling=vanilla"


@dataclass(frozen=True, slots=True)
class ResolvedPolicy:
    engine_type: str
    allocate: Allocation  #: for the dispatcher (waterfall_v1: always capability)
    scaling: ScalingPolicy


def make_policy(engine_type: str, content: str) -> ResolvedPolicy:
    if engine_type == "simple":
        return _simple(content)
    if engine_type == "waterfall_v1":
        waterfall = parse_waterfall_content(content)
        return ResolvedPolicy(
            engine_type=engine_type,
            allocate=Allocation.CAPABILITY,
            scaling=WaterfallScaling(waterfall.rules, waterfall.tasks_per_worker, waterfall.max_cost_per_hour),
        )
    raise ValueError(f"policy engine type {engine_type!r} is not one of: {', '.join(ENGINE_TYPES)}")


def _simple(content: str) -> ResolvedPolicy:
    simple = parse_simple_content(content)
    scaling: ScalingPolicy
    if simple.scaling == "no":
        scaling = NoScaling()
    elif simple.scaling == "vanilla":
        scaling = VanillaScaling(upper_ratio=simple.vanilla_upper_ratio, lower_ratio=simple.vanilla_lower_ratio)
    elif simple.scaling == "capability":
        scaling = CapabilityScaling(tasks_per_worker=simple.capability_tasks_per_worker)
    elif simple.scaling == "cost":
        scaling = CostScaling(
            tasks_per_worker=simple.work_tasks_per_worker,
            cooldown_seconds=simple.cooldown_seconds,
            target_finish_seconds=simple.target_finish_seconds,
            max_cost_per_hour=simple.max_cost_per_hour,
        )
    else:
        scaling = WorkScaling(
            tasks_per_worker=simple.work_tasks_per_worker,
            cooldown_seconds=simple.cooldown_seconds,
            target_finish_seconds=simple.target_finish_seconds,
        )
    return ResolvedPolicy(engine_type="simple", allocate=simple.allocate, scaling=scaling)
