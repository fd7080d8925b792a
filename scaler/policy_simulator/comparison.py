"""Command line: compare the scaling policies on simulated traces and print Markdown tables.

    python -m scaler.policy_simulator.comparison [--trace bursty|steady|one-shot|all] [--seed N]

The traces are replayed against the real scheduler core and reconcilers (`cluster_simulation`); this
module owns the seeded `random.Random` and the printing. docs/scaling.md shows its output; rerun it after
changing a policy, the dispatcher or the reconciler.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scaler.policy.protocols import ScalingPolicy
from scaler.policy.registry import make_policy
from scaler.policy.traces import Trace, bursty_trace, one_shot_trace, steady_trace
from scaler.policy_simulator.cluster_simulation import SimulatedManager, SimulationReport, SimulationSettings, simulate

MANAGER_ID = "native"
MAX_WORKERS = 32
BOOT_SECONDS = 5.0
FIXED_POOL = 8


@dataclass(frozen=True, slots=True)
class ComparedPolicy:
    label: str
    engine_type: str
    content: str
    initial_workers: int = 0


CONTENDERS = (
    ComparedPolicy(f"no ({FIXED_POOL} fixed workers)", "simple", "allocate=even_load; scaling=no", FIXED_POOL),
    ComparedPolicy("vanilla", "simple", "allocate=even_load; scaling=vanilla"),
    ComparedPolicy("capability", "simple", "allocate=capability; scaling=capability"),
    ComparedPolicy("waterfall_v1 (one tier)", "waterfall_v1", f"1, {MANAGER_ID}"),
    ComparedPolicy("work (cooldown 15 s)", "simple", "allocate=even_load; scaling=work"),
    ComparedPolicy("work (cooldown 60 s)", "simple", "allocate=even_load; scaling=work; cooldown_seconds=60"),
    ComparedPolicy("work (4 tasks per worker)", "simple", "allocate=even_load; scaling=work; work_tasks_per_worker=4"),
)

TRACES: dict[str, tuple[str, Callable[[random.Random], Trace]]] = {
    "bursty": (
        "bursty: 10 bursts of 40 tasks (2.5-7.5 s each) every 60 s",
        lambda rng: bursty_trace(rng, burst_size=40, period_seconds=60.0, bursts=10, task_seconds=5.0),
    ),
    "steady": (
        "steady: Poisson arrivals at 2 tasks/s for 600 s, 3 s each",
        lambda rng: steady_trace(rng, rate_per_second=2.0, duration_seconds=600.0, task_seconds=3.0),
    ),
    "one-shot": ("one-shot: 100 tasks of 0.1 s at t = 0", lambda _rng: one_shot_trace(100, 0.1)),
}

HEADER = (
    "| policy | worker-seconds | p50 latency (s) | p95 latency (s) | launches | terminations | killed tasks |\n"
    "|---|---:|---:|---:|---:|---:|---:|"
)


def run_contender(contender: ComparedPolicy, trace: Trace, settings: SimulationSettings) -> SimulationReport:
    policy: ScalingPolicy = make_policy(contender.engine_type, contender.content).scaling
    manager = SimulatedManager(MANAGER_ID, (), MAX_WORKERS, BOOT_SECONDS, contender.initial_workers)
    return simulate(policy, trace, (manager,), settings)


def format_row(label: str, report: SimulationReport) -> str:
    unfinished = f" ({report.unfinished_tasks} unfinished)" if report.unfinished_tasks else ""
    return (
        f"| {label}{unfinished} | {report.worker_seconds:,.0f} | {report.latency_p50_seconds:.1f} | "
        f"{report.latency_p95_seconds:.1f} | {report.launches} | {report.terminations} | {report.killed_tasks} |"
    )


def compare(trace_name: str, seed: int) -> str:
    title, make_trace = TRACES[trace_name]
    trace = make_trace(random.Random(seed))
    settings = SimulationSettings()
    rows = [format_row(contender.label, run_contender(contender, trace, settings)) for contender in CONTENDERS]
    setting = (
        f"one manager, max {MAX_WORKERS} workers, boot {BOOT_SECONDS:g} s, heartbeat {settings.heartbeat_seconds:g} s, "
        f"seed {seed}; the run ends {settings.tail_seconds:g} s after the last task finished"
    )
    return "\n".join([f"**{title}** ({setting})", "", HEADER, *rows])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(  # flags only as written in full (as SettingsParser)
        allow_abbrev=False, prog="python -m scaler.policy_simulator.comparison", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--trace", choices=(*TRACES, "all"), default="all")
    parser.add_argument("--seed", type=int, default=1)
    arguments = parser.parse_args(argv)
    names = list(TRACES) if arguments.trace == "all" else [arguments.trace]
    print("\n\n".join(compare(name, arguments.seed) for name in names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
