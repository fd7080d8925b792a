"""Task-arrival traces written as CSV, for `scaler_simulate_policy`: text in, a `Trace` out (no file access).

One task per line: `arrival_seconds, duration_seconds[, capabilities[, function_name]]`.
- `arrival_seconds`: when the task is submitted, seconds from the start (>= 0); lines need not be sorted;
- `duration_seconds`: how long it runs once a worker has it (>= 0);
- `capabilities`: what it requires, as `--per-worker-capabilities` writes it (`gpu`, `"linux,cpu=8"` quoted
  because of its comma); empty for none;
- `function_name`: what the scheduler learns run times by; empty or absent: `f`.
A first line whose first two fields are not numbers is a header and is skipped (a first task line with a typo
in one of them is an error, not a header); blank lines and lines starting with `#` are skipped. Any other
problem raises `TraceFileError` naming the source, the line and what is wrong.
"""

from __future__ import annotations

import csv
import math

from scaler.policy.capability import parse_capabilities
from scaler.policy.traces import TaskArrival, Trace
from scaler.protocol.messages import Capabilities

COLUMNS = "arrival_seconds, duration_seconds[, capabilities[, function_name]]"
DEFAULT_FUNCTION_NAME = "f"


class TraceFileError(ValueError):
    """A trace the user must fix; the message names the file and line."""


def parse_trace_csv(text: str, source: str) -> Trace:
    """The trace in `text`, sorted by arrival (ties keep their line order). `source` names it in messages."""
    arrivals: list[TaskArrival] = []
    is_first_row = True
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = _fields(source, number, line)
        if is_first_row and not any(_is_number(field) for field in fields[:2]):
            is_first_row = False
            continue  # a header
        is_first_row = False
        arrivals.append(_arrival(f"{source}, line {number}", fields))
    if not arrivals:
        raise TraceFileError(f"{source}: no tasks (expected one line per task: {COLUMNS})")
    return tuple(sorted(arrivals, key=lambda arrival: arrival.arrival_seconds))


def _fields(source: str, number: int, line: str) -> list[str]:
    try:
        (row,) = csv.reader([line], skipinitialspace=True, strict=True)
    except (csv.Error, ValueError) as error:
        raise TraceFileError(f"{source}, line {number}: not a CSV line ({error})") from None
    return [field.strip() for field in row]


def _arrival(where: str, fields: list[str]) -> TaskArrival:
    if not 2 <= len(fields) <= 4:
        raise TraceFileError(f"{where}: {len(fields)} fields; expected 2 to 4: {COLUMNS}")
    arrival = _seconds(where, "arrival_seconds", fields[0])
    duration = _seconds(where, "duration_seconds", fields[1])
    capabilities: Capabilities = ()
    if len(fields) > 2 and fields[2]:
        try:
            capabilities = parse_capabilities(fields[2])
        except ValueError as error:
            raise TraceFileError(f"{where}: {error}") from None
    function_name = fields[3] if len(fields) > 3 and fields[3] else DEFAULT_FUNCTION_NAME
    return TaskArrival(arrival, duration, capabilities, function_name)


def _seconds(where: str, name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise TraceFileError(f"{where}: {name} {raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise TraceFileError(f"{where}: {name} {raw!r} must be a finite number >= 0")
    return value


def _is_number(raw: str) -> bool:
    try:
        float(raw)
    except ValueError:
        return False
    return True
