"""The seam between the scheduler core and a scaling policy.

Rules every implementation keeps (checked by tests/unit/test_policy_contract.py):
- pure: the result depends only on the arguments; no clock (time is `snapshot.now`), no randomness,
  no I/O, no mutation of the snapshot or the memory;
- every target is >= 0 in total and <= the manager's `max_workers` when that is limited;
- an entry names only a capability set the manager's capabilities cover;
- `drain` lists only that manager's idle workers.
"""

from __future__ import annotations

from typing import Protocol

from scaler.policy.decision import ScalingMemory, ScalingStep
from scaler.policy.snapshot import ScalingSnapshot


class ScalingPolicy(Protocol):
    @property
    def name(self) -> str:
        """A short description for logs, e.g. `vanilla(upper_ratio=10, lower_ratio=1)`."""
        ...

    def decide(self, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingStep:
        """Targets for the managers that should get one now, plus the memory for the next call."""
        ...
