"""Tasks grouped by the *names* of the capabilities they require (values are never compared)."""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.snapshot import ScalingSnapshot
from scaler.protocol.messages import Capabilities

CapabilityNames = tuple[str, ...]  #: sorted


@dataclass(frozen=True, slots=True)
class CapabilitySet:
    names: CapabilityNames
    capabilities: Capabilities  #: of the first task group with these names: what targets carry
    queued: int
    running: int

    @property
    def tasks(self) -> int:
        return self.queued + self.running


def names_of(capabilities: Capabilities) -> CapabilityNames:
    return tuple(sorted(name for name, _value in capabilities))


def capability_sets(snapshot: ScalingSnapshot) -> tuple[CapabilitySet, ...]:
    """The sets that have tasks, in order of first appearance in the snapshot."""
    merged: dict[CapabilityNames, CapabilitySet] = {}
    for group in snapshot.task_groups:
        if group.tasks == 0:
            continue
        names = names_of(group.capabilities)
        known = merged.get(names)
        if known is None:
            merged[names] = CapabilitySet(names, group.capabilities, group.queued, group.running)
        else:
            merged[names] = CapabilitySet(
                names, known.capabilities, known.queued + group.queued, known.running + group.running
            )
    return tuple(merged.values())


def most_specific_first(sets: tuple[CapabilitySet, ...]) -> tuple[CapabilitySet, ...]:
    """Sets needing more names first: they fit fewer managers, so they get first call on capacity."""
    return tuple(sorted(sets, key=lambda capability_set: (-len(capability_set.names), capability_set.names)))
