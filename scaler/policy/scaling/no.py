"""`scaling=no`: never sends a target, so dynamic managers start nothing (static clusters)."""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.decision import ScalingMemory, ScalingStep
from scaler.policy.snapshot import ScalingSnapshot


@dataclass(frozen=True, slots=True)
class NoScaling:
    @property
    def name(self) -> str:
        return "no"

    def decide(self, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingStep:
        return ScalingStep(decision={}, memory=memory)
