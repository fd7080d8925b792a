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
from scaler.testing.cluster_simulation import SimulatedManager, SimulationReport, SimulationSettings, simulate

#: Every policy the command knows, in the order it prints them. `config` is the [scheduler] policy of the
#: TOML file; `work_target` is `work` with the command's `--target-finish-seconds`.
POLICY_NAMES = ("config", "vanilla", "capability", "work", "work_target", "waterfall_v1", "no")
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
    scales; any other is scaled by the policy up to `max_task_concurrency` (-1: unlimited)."""
    managers = []
    for manager in settings:
        capabilities = parse_capabilities(manager.per_worker_capabilities)
        limit = None if manager.max_task_concurrency < 0 else manager.max_task_concurrency
        if isinstance(manager, NativeWorkerManagerConfig) and manager.mode == "fixed":
            fixed = SimulatedManager(manager.worker_manager_id, capabilities, 0, boot_seconds, limit or 0)
            managers.append(fixed)
        else:
            managers.append(SimulatedManager(manager.worker_manager_id, capabilities, limit, boot_seconds))
    return tuple(managers)


def contenders(
    names: Sequence[str],
    managers: Sequence[SimulatedManager],
    config_policy: tuple[str, str] | None = None,
    target_finish_seconds: float | None = None,
) -> tuple[Contender, ...]:
    """The named policies; `config_policy` is the file's (engine type, content). Raises ValueError naming what is
    missing for a name that cannot run (`config` without a [scheduler] policy, `work_target` without a T) or
    what is wrong with a policy's settings."""
    built: list[Contender] = []
    for name in dict.fromkeys(names):
        if name == "config":
            if config_policy is None:
                raise ValueError("policy 'config' needs a --config file with a [scheduler] section")
            built.append(Contender(name, *config_policy))
        elif name == "work_target":
            if target_finish_seconds is None:
                raise ValueError("policy 'work_target' needs --target-finish-seconds")
            content = f"allocate=capability; scaling=work; target_finish_seconds={target_finish_seconds:g}"
            built.append(Contender(name, "simple", content))
        elif name == "waterfall_v1":
            rules = "\n".join(f"{tier}, {manager.manager_id}" for tier, manager in enumerate(managers, start=1))
            built.append(Contender(name, "waterfall_v1", rules))
        elif name == "no":
            built.append(Contender(name, "simple", "allocate=capability; scaling=no", is_fixed_pool=True))
        elif name in ("vanilla", "capability", "work"):
            built.append(Contender(name, "simple", f"allocate=capability; scaling={name}"))
        else:
            raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}")
    for contender in built:
        try:
            make_policy(contender.engine_type, contender.content)
        except ValueError as error:
            raise ValueError(f"policy {contender.name} ({contender.engine_type}): {error}") from None
    return tuple(built)


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
    "| policy | worker-seconds | launches | peak workers | p50 latency (s) | p95 latency (s) | max latency (s) "
    "| unfinished |\n|---|---:|---:|---:|---:|---:|---:|---:|"
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
        str(report.launches),
        str(report.peak_workers),
        _seconds(report.latency_p50_seconds),
        _seconds(report.latency_p95_seconds),
        _seconds(report.latency_max_seconds),
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
    return f"{manager.manager_id} ({limit}{with_capabilities}, boot {manager.boot_seconds:g} s)"


def _seconds(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}"
