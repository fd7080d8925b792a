"""What a client says about sharing the cluster, checked at the call: task priorities, its share, its quota.

A task's priority on the wire is the user's priority and the nesting depth, in one integer.

The scheduler and the workers order tasks by one integer, higher first. The user's priority (`submit(...,
priority=N)`) is its high part and the nesting depth its low `DEPTH_BITS` bits, so that:

- any task of a higher user priority goes before any task of a lower one, nested or not;
- within one user priority, nested tasks (depth + 1 per level) go before new work, as they always did: a parent
  waiting on its children holds a slot's worth of work that only they can finish.

A nested task keeps its parent's user priority unless it names one itself. Depths beyond the low bits stay at the
deepest value (a recursion 1,000 levels deep orders its deepest levels as equals).
"""

from __future__ import annotations

import inspect
import math

from scaler.payload import processor_context
from scaler.protocol.messages import PRIORITY_DEPTH_BITS

DEPTH_BITS = PRIORITY_DEPTH_BITS
MAX_DEPTH = (1 << DEPTH_BITS) - 1
#: The user's priorities allowed: the wire field is a signed 32-bit integer.
MAX_PRIORITY = (1 << (31 - DEPTH_BITS)) - 1
MIN_PRIORITY = -(1 << (31 - DEPTH_BITS))


def checked_priority(priority: object) -> int:
    """The user's priority as given, or a clear error: an int (not a bool) within the range the wire carries."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority must be an integer, not {type(priority).__name__} ({priority!r})")
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}, not {priority}")
    return priority


def wire_priority(priority: int | None) -> int:
    """The wire value of a task submitted now: from the calling task's (if any) one level deeper, with the user's
    priority in place of its parent's when given."""
    context = processor_context.current()
    parent = context.task_priority if context is not None else None
    if parent is None:
        return (checked_priority(priority) if priority is not None else 0) << DEPTH_BITS
    depth = min(MAX_DEPTH, (parent & MAX_DEPTH) + 1)
    base = checked_priority(priority) if priority is not None else parent >> DEPTH_BITS
    return (base << DEPTH_BITS) | depth


def user_priority(wire: int) -> int:
    """The user's priority of a wire value (for what status shows)."""
    return wire >> DEPTH_BITS


def takes_parameter(function: object, name: str) -> bool:
    """Whether `function` has a parameter called `name` (then `submit` hands it such a keyword, not the scheduler)."""
    try:
        return name in inspect.signature(function).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def checked_share(share: object) -> float:
    """A client's share of the workers (a positive finite number), or a clear error."""
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise TypeError(f"share must be a positive number, not {type(share).__name__} ({share!r})")
    if not math.isfinite(share) or share <= 0:
        raise ValueError(f"share must be a positive number, not {share!r}")
    return float(share)


def checked_quota(name: str, quota: object) -> int:
    """A quota (the most of something at once): None for no quota, else a positive int, or a clear error."""
    if quota is None:
        return 0
    if isinstance(quota, bool) or not isinstance(quota, int):
        raise TypeError(f"{name} must be a positive integer or None, not {type(quota).__name__} ({quota!r})")
    if not 0 < quota < 2**32:
        raise ValueError(f"{name} must be a positive integer (None: no quota), not {quota}")
    return quota


def checked_resume_seconds(resume_seconds: object) -> float:
    """A client's resume window wish, as its hello carries it: None for the scheduler's window (0 on the wire), 0
    for none (negative on the wire), else the seconds; a clear error for anything else."""
    if resume_seconds is None:
        return 0.0
    if isinstance(resume_seconds, bool) or not isinstance(resume_seconds, (int, float)):
        raise TypeError(f"resume_seconds must be a number of seconds or None, not {type(resume_seconds).__name__}")
    if not (math.isfinite(resume_seconds) and resume_seconds >= 0):
        raise ValueError(f"resume_seconds must be 0 or more seconds (None: the scheduler's), not {resume_seconds}")
    return float(resume_seconds) if resume_seconds > 0 else -1.0
