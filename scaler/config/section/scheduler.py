"""The reference's `scaler.config.section.scheduler`: `PolicyConfig` (what `SchedulerClusterCombo(scaler_policy=...)`
takes) and the scheduler's settings section."""

from __future__ import annotations

from dataclasses import dataclass

from scaler.config.sections import SchedulerConfig


@dataclass(frozen=True)
class PolicyConfig:
    """A scaling policy by engine and content, as `--policy-engine-type` and `--policy-content` give it."""

    policy_engine_type: str = "simple"
    policy_content: str = "allocate=even_load; scaling=vanilla"


__all__ = ["PolicyConfig", "SchedulerConfig"]
