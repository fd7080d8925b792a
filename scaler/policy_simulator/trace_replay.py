"""What `scaler_simulate_policy` computes: one trace replayed under several scaling policies, one row each.

Values in, values out: the trace, the worker managers (from a stack's TOML file, or one local manager) and the
policies to compare. Every policy runs through the one simulator, `cluster_simulation.simulate` (the real
scheduler core, policy and reconcilers on a fake clock), so a replay shows what the code would do, not a model
of it. The command (`scaler.entry_points.simulate_policy`) reads the files and prints `format_report`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scaler.config.sections import NativeWorkerManagerConfig, WorkerManagerSettings
from scaler.policy.capability import covers, format_capabilities, parse_capabilities
from scaler.policy.registry import make_policy
from scaler.policy.traces import Trace
from scaler.policy_simulator.cluster_simulation import SimulatedManager, SimulationReport, SimulationSettings, simulate

#: Every policy the command knows, in the order it prints them. `config` is the [scheduler] policy of the
#: TOML file; `work_target` is `work` with the command's `--target-finish-seconds`.
POLICY_NAMES = ("config", "vanilla", "capability", "work", "work_target", "cost", "waterfall_v1", "no")
#: Without a TOML file: one local manager of this many workers at most.
DEFAULT_MANAGER = SimulatedManager("local", max_workers=32)


@dataclass(frozen=True, slots=True)
class Contender:
    """One row of the comparison: a policy as the scheduler's settings would name it."""

    name: str  #: one of POLICY_NAMES
    engine_type: str
    content: str
    is_fixed_pool: bool = False  #: `no`: every manager runs its max_workers from the start and never scales


@dataclass(frozen=True, slots=True)
class ReplayRow:
    contender: Contender
    policy_name: str  #: the policy's own description (`work(tasks_per_worker=1, ...)`)
    report: SimulationReport


def managers_of(settings: Sequence[WorkerManagerSettings], boot_seconds: float) -> tuple[SimulatedManager, ...]:
    """The simulated managers of a stack's [[worker_manager]] entries (ids already resolved), in file order.

    A `baremetal_native` manager in `mode = "fixed"` is a pool of `max_task_concurrency` workers that never
    scales; any other is scaled by the policy up to `max_task_concurrency` (-1: unlimited). A manager's workers
    boot in its `expected_boot_seconds` when it declares one, else in `boot_seconds`, and cost its
    `worker_cost_per_hour`."""
    managers = []
    for manager in settings:
        capabilities = parse_capabilities(manager.per_worker_capabilities)
        limit = None if manager.max_task_concurrency < 0 else manager.max_task_concurrency
        declared = manager.expected_boot_seconds if manager.expected_boot_seconds >= 0 else None
        simulated = SimulatedManager(
            manager.worker_manager_id, capabilities, limit, boot_seconds if declared is None else declared,
            worker_cost_per_hour=manager.worker_cost_per_hour, expected_boot_seconds=declared,
        )  # fmt: skip
        if isinstance(manager, NativeWorkerManagerConfig) and manager.mode == "fixed":
            simulated = replace(simulated, max_workers=0, initial_workers=limit or 0)
        managers.append(simulated)
    return tuple(managers)


def contenders(
    names: Sequence[str],
    managers: Sequence[SimulatedManager],
    config_policy: tuple[str, str] | None = None,
    target_finish_seconds: float | None = None,
    max_cost_per_hour: float | None = None,
) -> tuple[Contender, ...]:
    """The named policies; `config_policy` is the file's (engine type, content). Raises ValueError naming what is
    missing for a name that cannot run (`config` without a [scheduler] policy, `work_target` without a T) or
    what is wrong with a policy's settings."""
    built = [
        _contender(name, managers, config_policy, target_finish_seconds, max_cost_per_hour)
        for name in dict.fromkeys(names)
    ]
    for contender in built:
        try:
            make_policy(contender.engine_type, contender.content)
        except ValueError as error:
            raise ValueError(f"policy {contender.name} ({contender.engine_type}): {error}") from None
    return tuple(built)


def _contender(
    name: str,
    managers: Sequence[SimulatedManager],
    config_policy: tuple[str, str] | None,
    target_finish_seconds: float | None,
    max_cost_per_hour: float | None,
) -> Contender:
    if name == "config":
        if config_policy is None:
            raise ValueError("policy 'config' needs a --config file with a [scheduler] section")
        return Contender(name, *config_policy)
    if name == "work_target":
        if target_finish_seconds is None:
            raise ValueError("policy 'work_target' needs --target-finish-seconds")
        return Contender(
            name, "simple", f"allocate=capability; scaling=work; target_finish_seconds={target_finish_seconds:g}"
        )
    if name == "cost":
        content = "allocate=capability; scaling=cost"
        if target_finish_seconds is not None:
            content += f"; target_finish_seconds={target_finish_seconds:g}"
        if max_cost_per_hour is not None:
            content += f"; max_cost_per_hour={max_cost_per_hour:g}"
        return Contender(name, "simple", content)
    if name == "waterfall_v1":
        rules = "\n".join(f"{tier}, {manager.manager_id}" for tier, manager in enumerate(managers, start=1))
        return Contender(name, "waterfall_v1", rules)
    if name == "no":
        return Contender(name, "simple", "allocate=capability; scaling=no", is_fixed_pool=True)
    if name in ("vanilla", "capability", "work"):
        return Contender(name, "simple", f"allocate=capability; scaling={name}")
    raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}")


def default_names(has_config_policy: bool, target_finish_seconds: float | None) -> tuple[str, ...]:
    """Every policy that can run with what was given."""
    return tuple(
        name
        for name in POLICY_NAMES
        if (name != "config" or has_config_policy) and (name != "work_target" or target_finish_seconds is not None)
    )


def replay(
    contender: Contender, trace: Trace, managers: Sequence[SimulatedManager], settings: SimulationSettings
) -> ReplayRow:
    """The trace under one policy (from `contenders`, so its settings are valid)."""
    policy = make_policy(contender.engine_type, contender.content)
    name = policy.scaling.name
    if contender.is_fixed_pool:
        managers = [fixed_pool(manager) for manager in managers]
        pools = ", ".join(f"{manager.manager_id} {manager.initial_workers}" for manager in managers)
        name += f" (fixed pools: {pools})"
    report = simulate(policy.scaling, trace, tuple(managers), replace(settings, allocate=policy.allocate))
    return ReplayRow(contender, name, report)


def fixed_pool(manager: SimulatedManager) -> SimulatedManager:
    """The manager as a pool of its maximum, always on (an unlimited manager has no maximum to run: 0)."""
    return replace(manager, initial_workers=manager.initial_workers + (manager.max_workers or 0), max_workers=0)


# ---------------------------------------------------------------- printing

HEADER = (
    "| policy | worker-seconds | cost | launches | peak workers | p50 latency (s) | p95 latency (s) "
    "| max latency (s) | budget-capped (s) | unfinished |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def format_report(
    source: str,
    trace: Trace,
    managers: Sequence[SimulatedManager],
    settings: SimulationSettings,
    rows: Sequence[ReplayRow],
) -> str:
    """A line on what was replayed, the table, then what each name ran and the policies' warnings."""
    lines = [describe(source, trace, managers, settings), "", HEADER]
    lines.extend(format_row(row) for row in rows)
    lines.append("")
    lines.extend(f"{row.contender.name}: {row.policy_name}" for row in rows)
    lines.extend(f"note: {note}" for note in trace_notes(trace, managers))
    for row in rows:
        lines.extend(f"{row.contender.name}: warning: {warning}" for warning in row.report.warnings)
    return "\n".join(lines)


def report_json(rows: Sequence[ReplayRow]) -> dict[str, dict[str, float | int | None]]:
    """`{policy: {worker_seconds, cost, p50, p95, max, launches, peak_workers, capped_seconds, unfinished}}`;
    a latency no task had (none finished) is null."""

    def latency(value: float) -> float | None:
        return None if math.isnan(value) else round(value, 3)

    return {
        row.contender.name: {
            "worker_seconds": round(row.report.worker_seconds, 3),
            "cost": round(row.report.cost, 4),
            "p50": latency(row.report.latency_p50_seconds),
            "p95": latency(row.report.latency_p95_seconds),
            "max": latency(row.report.latency_max_seconds),
            "launches": row.report.launches,
            "peak_workers": row.report.peak_workers,
            "capped_seconds": round(row.report.capped_seconds, 3),
            "unfinished": row.report.unfinished_tasks,
        }
        for row in rows
    }


def trace_notes(trace: Trace, managers: Sequence[SimulatedManager]) -> tuple[str, ...]:
    """What the user should know about the trace against these managers: tasks none of them can run."""
    stranded: dict[str, int] = {}
    for arrival in trace:
        if not any(covers(manager.capabilities, arrival.capabilities) for manager in managers):
            text = format_capabilities(arrival.capabilities)
            stranded[text] = stranded.get(text, 0) + 1
    return tuple(
        f"{count} task(s) require {text}, which no worker manager offers: they never run (unfinished)"
        for text, count in sorted(stranded.items())
    )


def format_row(row: ReplayRow) -> str:
    report = row.report
    cells = (
        row.contender.name,
        f"{report.worker_seconds:,.0f}",
        f"{report.cost:,.2f}",
        str(report.launches),
        str(report.peak_workers),
        _seconds(report.latency_p50_seconds),
        _seconds(report.latency_p95_seconds),
        _seconds(report.latency_max_seconds),
        f"{report.capped_seconds:,.0f}",
        str(report.unfinished_tasks),
    )
    return "| " + " | ".join(cells) + " |"


def describe(source: str, trace: Trace, managers: Sequence[SimulatedManager], settings: SimulationSettings) -> str:
    first, last = trace[0].arrival_seconds, trace[-1].arrival_seconds
    work = sum(arrival.duration_seconds for arrival in trace)
    described = ", ".join(_manager_words(manager) for manager in managers)
    return (
        f"{source}: {len(trace)} task(s) arriving over {last - first:,.1f} s, {work:,.1f} task-seconds; "
        f"managers: {described}; heartbeat {settings.heartbeat_seconds:g} s; "
        f"the run ends {settings.tail_seconds:g} s after the last task finished"
    )


def _manager_words(manager: SimulatedManager) -> str:
    limit = "unlimited" if manager.max_workers is None else f"max {manager.max_workers}"
    if manager.initial_workers:
        limit = f"{manager.initial_workers} fixed"
    capabilities = format_capabilities(manager.capabilities)
    with_capabilities = f", {capabilities}" if capabilities else ""
    price = f", {manager.worker_cost_per_hour:g}/worker-hour" if manager.worker_cost_per_hour else ""
    return f"{manager.manager_id} ({limit}{with_capabilities}, boot {manager.boot_seconds:g} s{price})"


def _seconds(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}"
