"""The reference's `scaler.config.section.scheduler`: `PolicyConfig` (what `SchedulerClusterCombo(scaler_policy=...)`
takes) and the scheduler's settings section."""

from __future__ import annotations

from dataclasses import dataclass, fields

from scaler.config.sections import SchedulerConfig

_DEFAULTS: dict[str, str] = {
    field.name: str(field.default) for field in fields(SchedulerConfig) if field.name.startswith("policy_")
}


@dataclass(frozen=True)
class PolicyConfig:
    """A scaling policy by engine and content, as `--policy-engine-type` and `--policy-content` give it (and with
    their defaults)."""

    policy_engine_type: str = _DEFAULTS["policy_engine_type"]
    policy_content: str = _DEFAULTS["policy_content"]


__all__ = ["PolicyConfig", "SchedulerConfig"]
