"""Scaling policies, one module each. Every policy is a frozen value whose `decide` is pure."""

from __future__ import annotations

from scaler.policy.scaling.capability import CapabilityScaling
from scaler.policy.scaling.cost import CostScaling
from scaler.policy.scaling.no import NoScaling
from scaler.policy.scaling.vanilla import VanillaScaling
from scaler.policy.scaling.waterfall import WaterfallScaling
from scaler.policy.scaling.work import WorkScaling

__all__ = ["CapabilityScaling", "CostScaling", "NoScaling", "VanillaScaling", "WaterfallScaling", "WorkScaling"]
