"""What the documentation tier prints at the end of a run: per page and pip, the steps that ran, those skipped (with
the page's reason), those that failed (and why, briefly) and those not reached after a failure; then the tier's wall
and CPU time. Each page's test records its counts in its report's user properties (which pytest-xdist carries to
the controller), and `write_summary` (called from tests/conftest.py's pytest_terminal_summary) prints them."""

from __future__ import annotations

import json
import resource
from typing import Any

import pytest

from tests.docs.runner import StepResult

PROPERTY = "doc_steps"
#: Steps that took this long are listed with their time.
SLOW_STEP_SECONDS = 10.0
OUTCOMES = ("ran", "skipped", "failed", "not reached")


def cpu_seconds() -> float:
    """CPU time of this process and of the children it waited for (the commands and scripts a page ran)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def record(node: pytest.Item, page: str, pip: str, results: list[StepResult], wall: float, cpu: float) -> None:
    steps = [
        {"where": result.step.where, "outcome": result.outcome, "detail": result.detail.splitlines()[0][:200]
         if result.detail else "", "seconds": round(result.seconds, 1)}
        for result in results
    ]  # fmt: skip
    node.user_properties.append((PROPERTY, json.dumps({"page": page, "pip": pip, "steps": steps, "wall": wall,
                                                       "cpu": cpu})))  # fmt: skip


def write_summary(terminalreporter: Any) -> None:
    pages = _recorded(terminalreporter.stats)
    if not pages:
        return
    write = terminalreporter.write_line
    terminalreporter.section("documentation tier: steps per page")
    totals = dict.fromkeys(OUTCOMES, 0)
    for page in sorted(pages, key=lambda page: (page["pip"], page["page"])):
        counts = dict.fromkeys(OUTCOMES, 0)
        for step in page["steps"]:
            counts[step["outcome"]] += 1
            totals[step["outcome"]] += 1
        write(f"{page['page']} [{page['pip']}]: " + ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
              + f" ({page['wall']:.0f} s, CPU {page['cpu']:.0f} s)")  # fmt: skip
        for step in page["steps"]:
            if step["outcome"] in ("skipped", "failed"):
                write(f"    {step['outcome']}: {step['where']}: {step['detail']}")
            elif step["seconds"] >= SLOW_STEP_SECONDS:
                write(f"    {step['seconds']:.0f} s: {step['where']}")
    wall = sum(page["wall"] for page in pages)
    cpu = sum(page["cpu"] for page in pages)
    write(", ".join(f"{n} {outcome}" for outcome, n in totals.items())
          + f"; {len(pages)} page runs, {wall:.0f} s wall, {cpu:.0f} s CPU")  # fmt: skip


def _recorded(stats: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The pages' records, once per test (from the reports of their call phase)."""
    pages = []
    seen = set()
    for reports in stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call" or report.nodeid in seen:
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name == PROPERTY:
                    seen.add(report.nodeid)
                    pages.append(json.loads(value))
    return pages
