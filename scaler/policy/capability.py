"""Capability strings (`linux,cpu=8`) and capability-set matching.

One grammar for every place a user types capabilities: a worker's or a manager's
`--per-worker-capabilities`, and the capability sets scaling policies reason about.

Matching is by **names**: a provider covers a requirement when the requirement's names are a subset of
the provider's names. Quantities (`cpu=8`) are carried along but not compared, as in the reference
implementation's capability allocation and scaling, with one exception: `memory`, in bytes (`memory=8GiB`
is read as 8 * 1024**3), is compared by quantity. A requirement `memory=N` is covered by a provider whose
`memory` is at least N; a worker without a declared `memory` offers the memory limit it reports. The
scheduler adds such a requirement to a task that ran out of memory (`needs_more_memory`), so its retry
goes to a bigger worker, and the scaling policies ask a manager whose workers are bigger.
"""

from __future__ import annotations

from scaler.config.byte_size import ACCEPTED_FORMS, format_byte_size, parse_byte_size
from scaler.protocol.message_extras import Capabilities

#: Value of a capability that is present without a quantity (`linux` rather than `cpu=8`).
PRESENT = -1
#: The one capability compared by quantity: bytes of memory.
MEMORY = "memory"


def parse_capabilities(text: str) -> Capabilities:
    """Parse `"linux,cpu=8"` into `(("cpu", 8), ("linux", -1))` (sorted by name).

    An empty or blank string means no capabilities. Raises `ValueError` naming the bad item for an
    empty name (`=1`, a trailing comma), a value that is not an integer (`cpu=`, `gpu=x`), a value below
    -1, or a name given twice.
    """
    if not text.strip():
        return ()
    values: dict[str, int] = {}
    for position, raw_item in enumerate(text.split(","), start=1):
        name, value = _parse_item(raw_item, position, text)
        if name in values:
            raise ValueError(f"capability {name!r} is given twice in {text!r}")
        values[name] = value
    return tuple(sorted(values.items()))


def _parse_item(raw_item: str, position: int, text: str) -> tuple[str, int]:
    item = raw_item.strip()
    name, has_value, raw_value = item.partition("=")
    name = name.strip()
    if not name:
        raise ValueError(
            f"capability item {position} ({raw_item.strip()!r}) in {text!r} has an empty name; "
            "expected 'name' or 'name=<int>', separated by commas"
        )
    if not has_value:
        return name, PRESENT
    raw_value = raw_value.strip()
    if name == MEMORY:
        try:
            return name, parse_byte_size(raw_value)
        except ValueError:
            raise ValueError(
                f"capability {MEMORY!r} in {text!r} has value {raw_value!r}; expected {ACCEPTED_FORMS}"
            ) from None
    try:
        value = int(raw_value)
    except ValueError:
        raise ValueError(
            f"capability {name!r} in {text!r} has value {raw_value!r}, which is not an integer; "
            "write 'name' for a capability without quantity or 'name=<int>'"
        ) from None
    if value < PRESENT:
        raise ValueError(f"capability {name!r} in {text!r} has value {value}; quantities are >= 0 (or -1 for none)")
    return name, value


def format_capabilities(capabilities: Capabilities) -> str:
    """The printed form: `name` for a value of -1, else `name=value`, comma-joined, sorted by name."""
    return ",".join(name if value == PRESENT else f"{name}={value}" for name, value in sorted(capabilities))


def capability_needs(capabilities: Capabilities) -> str:
    """`gpu, memory >= 256 MiB`: the names, and a `memory` quantity as the least it needs (what waiting tasks ask
    for, in the scheduler's words)."""
    return ", ".join(
        f"{name} >= {format_byte_size(value)}" if name == MEMORY and value != PRESENT else name
        for name, value in sorted(capabilities)
    )


def capability_names(capabilities: Capabilities) -> frozenset[str]:
    return frozenset(name for name, _value in capabilities)


def covers(offered: Capabilities, required: Capabilities) -> bool:
    """True when every name in `required` is also in `offered` (values are ignored, but for `memory`: a
    required quantity needs an offered quantity at least as large)."""
    needed = memory_needed(required)
    if needed != PRESENT and memory_needed(offered) < needed:
        return False
    return capability_names(required) <= capability_names(offered)


def memory_needed(capabilities: Capabilities) -> int:
    """The `memory` quantity in `capabilities`: bytes; PRESENT when it has none (or no `memory` at all)."""
    for name, value in capabilities:
        if name == MEMORY:
            return value
    return PRESENT


def offered_memory(capabilities: Capabilities, reported_limit_bytes: int) -> int:
    """A worker's memory: the `memory` it declares, else the limit its heartbeats report (0: not reported yet)."""
    declared = memory_needed(capabilities)
    return reported_limit_bytes if declared == PRESENT else declared


def offers_enough(names: frozenset[str], memory_bytes: int, required: Capabilities) -> bool:
    """Whether a worker offering `names` and `memory_bytes` of memory (its declared `memory`, else the limit it
    reports; 0 when unknown) can run a task requiring `required`."""
    for name, value in required:
        if name == MEMORY and value != PRESENT:
            if memory_bytes < value:
                return False
        elif name not in names:
            return False
    return True


def needs_more_memory(capabilities: Capabilities, than_bytes: int) -> Capabilities:
    """`capabilities` with a `memory` requirement of more than `than_bytes` (kept if it asks for more already)."""
    wanted = max(than_bytes + 1, memory_needed(capabilities))
    return tuple(sorted({**dict(capabilities), MEMORY: wanted}.items()))
