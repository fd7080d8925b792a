"""Whether this machine can run the asyncio event loop a section's `event_loop` setting names.

`event_loop = "uvloop"` needs the optional uvloop package (the `uvloop` extra). Every command that runs a section
with the setting asks `event_loop_problem` while it checks its settings, so a missing package is refused in one line
with exit code 2 before anything starts (`scaler.config.loader.load_section_with_extras`, `scaler FILE`), and
`SchedulerClusterCombo` raises ValueError before it starts a process. `scaler.io.event_loop` makes the loop.
"""

from __future__ import annotations

import importlib.util
import sys

from scaler.config.sections import EVENT_LOOPS

#: the extra of the `scaler-compute` distribution that installs each flavour that is not built in (pyproject.toml)
EXTRAS = {"uvloop": "uvloop"}


def event_loop_problem(section: object) -> str | None:
    """One line naming what keeps this machine from running the event loop of `section` (any settings section; one
    without an `event_loop` setting has none) and what to do about it, else None. The package is found without
    importing it."""
    kind = getattr(section, "event_loop", None)
    if kind is None or kind == "builtin":
        return None
    if kind not in EVENT_LOOPS:
        return f"unknown event loop {kind!r}: choose one of {', '.join(EVENT_LOOPS)}"
    if sys.platform == "win32":
        return f"event loop {kind!r} does not run on Windows: use the builtin event loop"
    if importlib.util.find_spec(kind) is not None:
        return None
    return (
        f"event loop {kind!r} needs the {kind} package, which is not installed: "
        f"pip install 'scaler-compute[{EXTRAS[kind]}]', or use the builtin event loop"
    )
