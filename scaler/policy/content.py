"""Parsing of `policy_content` for both engines into typed, validated values.

`simple`: `;`-separated `key=value` items, whitespace trimmed, items without `=` ignored; `allocate`
and `scaling` are required, the threshold keys below are optional and belong to one scaling each.

`waterfall_v1`: one rule per line, `priority, worker_manager_id[, max_workers]`; `#` starts a comment
anywhere on a line; blank lines are skipped. Our extensions: a `tasks_per_worker=<int>` line and a
`max_cost_per_hour=<number>` line (a budget across the tiers).

Every refusal is a `ValueError` whose text names the bad key, value or line (with its number).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Literal, TypeVar


class Allocation(Enum):
    """How the scheduler's dispatcher places tasks (the `allocate=` item; its value is how settings spell it)."""

    EVEN_LOAD = "even_load"  #: the least loaded worker; tasks' capabilities are ignored (logged once)
    CAPABILITY = "capability"  #: the least loaded worker that offers every capability a task requires (default)


ScalingName = Literal["no", "vanilla", "capability", "work", "cost"]

ALLOCATE_NAMES: dict[str, Allocation] = {allocation.value: allocation for allocation in Allocation}
SCALING_NAMES: dict[str, ScalingName] = {
    "no": "no", "vanilla": "vanilla", "capability": "capability", "work": "work", "cost": "cost"
}  # fmt: skip

Number = int | float
NameT = TypeVar("NameT")


@dataclass(frozen=True, slots=True)
class _Threshold:
    scalings: tuple[ScalingName, ...]  #: the scalings the key applies to
    is_integer: bool
    minimum: Number
    is_minimum_allowed: bool
    default: Number | None  #: None: off unless given (read with `values.get`, never `value_of`)


#: Optional keys of the `simple` grammar: what they tune and their bounds.
THRESHOLDS: dict[str, _Threshold] = {
    "vanilla_upper_ratio": _Threshold(("vanilla",), False, 0, False, 10.0),
    "vanilla_lower_ratio": _Threshold(("vanilla",), False, 0, True, 1.0),
    "capability_tasks_per_worker": _Threshold(("capability",), True, 1, True, 5),
    "work_tasks_per_worker": _Threshold(("work", "cost"), True, 1, True, 1),
    "cooldown_seconds": _Threshold(("work", "cost"), False, 0, True, 15.0),
    "target_finish_seconds": _Threshold(("work", "cost"), False, 0, False, None),
    "max_cost_per_hour": _Threshold(("cost",), False, 0, False, None),
}
REQUIRED_SIMPLE_KEYS = ("allocate", "scaling")


@dataclass(frozen=True, slots=True)
class SimpleContent:
    allocate: Allocation
    scaling: ScalingName
    # the thresholds; their defaults and bounds live in THRESHOLDS
    vanilla_upper_ratio: float  #: tasks per worker above which a manager gets one more worker
    vanilla_lower_ratio: float  #: tasks per worker below which managers shrink
    capability_tasks_per_worker: int  #: per capability set, one worker per this many tasks
    work_tasks_per_worker: int  #: work policy: tasks one worker takes on at a time
    cooldown_seconds: float  #: work policy: how long a surplus must last before scaling down
    #: work policy: size the pool to finish the outstanding work (learned run times) in this long; None: off
    target_finish_seconds: float | None = None
    #: cost policy: the most all managers' workers may cost per hour together; None: no cap
    max_cost_per_hour: float | None = None


def parse_simple_content(text: str) -> SimpleContent:
    items = _split_items(text)
    allowed = (*REQUIRED_SIMPLE_KEYS, *THRESHOLDS)
    for key in items:
        if key not in allowed:
            raise ValueError(f"policy_content {text!r}: unknown key {key!r}; allowed keys: {', '.join(allowed)}")
    for key in REQUIRED_SIMPLE_KEYS:
        if key not in items:
            raise ValueError(f"policy_content {text!r}: key {key!r} is missing; 'allocate' and 'scaling' are required")
    allocate = _choice(text, "allocate", items["allocate"], ALLOCATE_NAMES)
    scaling = _choice(text, "scaling", items["scaling"], SCALING_NAMES)
    values = {key: _threshold(text, key, value, scaling) for key, value in items.items() if key in THRESHOLDS}

    def value_of(key: str) -> Number:
        value = values.get(key, THRESHOLDS[key].default)
        assert value is not None, f"{key} has no default: read it with values.get"
        return value

    target_finish_seconds = values.get("target_finish_seconds")
    max_cost_per_hour = values.get("max_cost_per_hour")

    content = SimpleContent(
        allocate=allocate,
        scaling=scaling,
        vanilla_upper_ratio=float(value_of("vanilla_upper_ratio")),
        vanilla_lower_ratio=float(value_of("vanilla_lower_ratio")),
        capability_tasks_per_worker=int(value_of("capability_tasks_per_worker")),
        work_tasks_per_worker=int(value_of("work_tasks_per_worker")),
        cooldown_seconds=float(value_of("cooldown_seconds")),
        target_finish_seconds=None if target_finish_seconds is None else float(target_finish_seconds),
        max_cost_per_hour=None if max_cost_per_hour is None else float(max_cost_per_hour),
    )
    if content.vanilla_lower_ratio > content.vanilla_upper_ratio:
        raise ValueError(
            f"policy_content {text!r}: vanilla_lower_ratio={content.vanilla_lower_ratio:g} is above "
            f"vanilla_upper_ratio={content.vanilla_upper_ratio:g}"
        )
    return content


def _split_items(text: str) -> dict[str, str]:
    items: dict[str, str] = {}
    for raw_item in text.split(";"):
        key, has_value, value = raw_item.partition("=")
        if not has_value:
            continue
        key = key.strip()
        if key in items:
            raise ValueError(f"policy_content {text!r}: key {key!r} is given twice")
        items[key] = value.strip()
    return items


def _choice(text: str, key: str, value: str, names: dict[str, NameT]) -> NameT:
    if value not in names:
        raise ValueError(f"policy_content {text!r}: {key}={value!r} is not one of: {', '.join(names)}")
    return names[value]


def _threshold(text: str, key: str, raw_value: str, scaling: ScalingName) -> Number:
    threshold = THRESHOLDS[key]
    if scaling not in threshold.scalings:
        applies = " or ".join(f"scaling={name}" for name in threshold.scalings)
        raise ValueError(f"policy_content {text!r}: {key} applies to {applies}, not scaling={scaling}")
    kind = "an integer" if threshold.is_integer else "a number"
    try:
        value: Number = int(raw_value) if threshold.is_integer else float(raw_value)
    except ValueError:
        raise ValueError(f"policy_content {text!r}: {key}={raw_value!r} is not {kind}") from None
    is_below = value < threshold.minimum if threshold.is_minimum_allowed else value <= threshold.minimum
    if is_below or not math.isfinite(value):
        bound = ">=" if threshold.is_minimum_allowed else ">"
        noun = "an integer" if threshold.is_integer else "a finite number"
        raise ValueError(f"policy_content {text!r}: {key}={raw_value!r} must be {noun} {bound} {threshold.minimum}")
    return value


# ---------------------------------------------------------------- waterfall_v1

WATERFALL_SETTINGS = ("tasks_per_worker", "max_cost_per_hour")
RULE_SHAPE = "'priority, worker_manager_id[, max_workers]'"


@dataclass(frozen=True, slots=True)
class WaterfallRule:
    priority: int  #: smaller is preferred
    manager_id: str  #: matched exactly against the manager's id
    max_workers: int | None = None  #: None: the manager's own reported maximum


@dataclass(frozen=True, slots=True)
class WaterfallContent:
    rules: tuple[WaterfallRule, ...]  #: ascending priority; equal priorities keep their written order
    tasks_per_worker: int = 10  #: the total target per capability set is ceil(tasks / this)
    max_cost_per_hour: float | None = None  #: the most the tiers' workers may cost per hour together; None: no cap


def parse_waterfall_content(text: str) -> WaterfallContent:
    rules: list[WaterfallRule] = []
    settings: dict[str, float] = {}
    seen_ids: dict[str, int] = {}
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" in line and "," not in line:
            key, value = _waterfall_setting(number, line)
            settings[key] = value
            continue
        rule = _waterfall_rule(number, line)
        if rule.manager_id in seen_ids:
            raise ValueError(
                f"waterfall_v1 line {number} ({line!r}): worker manager id {rule.manager_id!r} "
                f"already has a rule on line {seen_ids[rule.manager_id]}"
            )
        seen_ids[rule.manager_id] = number
        rules.append(rule)
    if not rules:
        raise ValueError(f"waterfall_v1 policy_content has no rules; write one {RULE_SHAPE} per line")
    rules.sort(key=lambda rule: rule.priority)
    budget = settings.get("max_cost_per_hour")
    return WaterfallContent(tuple(rules), int(settings.get("tasks_per_worker", 10)), budget)


def _waterfall_rule(number: int, line: str) -> WaterfallRule:
    fields = [field.strip() for field in line.split(",")]
    where = f"waterfall_v1 line {number} ({line!r})"
    if len(fields) not in (2, 3):
        raise ValueError(f"{where}: expected {RULE_SHAPE}, got {len(fields)} fields")
    priority = _integer(where, "priority", fields[0])
    manager_id = fields[1]
    if not manager_id:
        raise ValueError(f"{where}: worker_manager_id is empty")
    max_workers = _integer(where, "max_workers", fields[2]) if len(fields) == 3 else None
    if max_workers is not None and max_workers < 0:
        raise ValueError(f"{where}: max_workers must be >= 0 (leave the field out to use the manager's own maximum)")
    return WaterfallRule(priority, manager_id, max_workers)


def _waterfall_setting(number: int, line: str) -> tuple[str, float]:
    key, _, raw_value = (part.strip() for part in line.partition("="))
    where = f"waterfall_v1 line {number} ({line!r})"
    if key not in WATERFALL_SETTINGS:
        raise ValueError(f"{where}: unknown setting {key!r}; allowed settings: {', '.join(WATERFALL_SETTINGS)}")
    if key == "max_cost_per_hour":
        try:
            budget = float(raw_value)
        except ValueError:
            raise ValueError(f"{where}: {key}={raw_value!r} is not a number") from None
        if not math.isfinite(budget) or budget <= 0:
            raise ValueError(f"{where}: {key} must be a finite number > 0")
        return key, budget
    value = _integer(where, key, raw_value)
    if value < 1:
        raise ValueError(f"{where}: {key} must be >= 1")
    return key, value


def _integer(where: str, name: str, raw_value: str) -> int:
    try:
        return int(raw_value)
    except ValueError:
        raise ValueError(f"{where}: {name} {raw_value!r} is not an integer") from None
