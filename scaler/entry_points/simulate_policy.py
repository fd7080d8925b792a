# PYTHON_ARGCOMPLETE_OK
"""`scaler_simulate_policy TRACE [--config FILE] [--policy NAME ...]`: replay a task trace under scaling policies.

Reads the trace (CSV, `scaler.policy.trace_csv`) and the stack's TOML file (as `scaler FILE` reads it), runs
`scaler.policy_simulator.trace_replay` and prints its table. Nothing is started: the scheduler core, the policies and
the reconcilers run in this process on a simulated clock. Bad input exits with 2 and one message.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from scaler.config.completion import offer_completion
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.version import __version__

if TYPE_CHECKING:
    from scaler.policy_simulator.cluster_simulation import SimulatedManager

PROG = "scaler_simulate_policy"


_TRACE_COLUMNS = """\
TRACE columns, one task per line (a first line that is not numbers is a header;
blank lines and lines starting with # are skipped):
  arrival_seconds   when the task is submitted, seconds from the start
                    (the lines need not be sorted)
  duration_seconds  how long it runs once a worker has it, seconds
  capabilities      optional: what it requires, as --per-worker-capabilities
                    writes it (gpu, or "linux,cpu=8" quoted for its comma)
  function_name     optional: what the scheduler learns run times by
                    (default: f)
  e.g.  0.5, 12, gpu, train"""


def _filled(text: str) -> str:
    return textwrap.fill(text, width=shutil.get_terminal_size().columns - 2)  # as argparse wraps its own text


def main(argv: Sequence[str] | None = None) -> int:
    from scaler.policy.trace_csv import COLUMNS
    from scaler.policy_simulator.trace_replay import POLICY_NAMES

    parser = argparse.ArgumentParser(  # flags only as written in full (as SettingsParser)
        allow_abbrev=False,
        prog=PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_filled(
            "Replay a task-arrival trace against the worker managers of a scaler TOML file under each scaling "
            "policy, on a simulated clock (the real scheduler core, policies and reconcilers; nothing is started), "
            "and print worker-seconds, cost, launches, peak workers, task latencies (arrival to result) and the "
            "seconds a budget held workers back, per policy."
        ),
        epilog=_TRACE_COLUMNS
        + "\n\n"
        + _filled(
            "Policies: config (the [scheduler] policy of --config), vanilla, capability, work, work_target (work "
            "with --target-finish-seconds), cost (cheapest managers first; with --target-finish-seconds and "
            "--max-cost-per-hour when given), waterfall_v1 (the [[worker_manager]] entries as tiers, in file "
            "order), no (each manager a fixed pool of its maximum). Default: all that apply."
        ),
    )
    parser.add_argument(
        "trace", metavar="TRACE", help=f"the trace, a CSV file: one task per line, {COLUMNS} (see below)"
    )
    parser.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help="a scaler TOML file: its [[worker_manager]] entries and [scheduler] policy (default: one local "
        "manager of at most 32 workers)",
    )
    parser.add_argument(
        "--policy", metavar="NAME", nargs="+", action="extend", choices=POLICY_NAMES, help="policies to compare"
    )
    parser.add_argument(
        "--target-finish-seconds",
        metavar="T",
        type=_positive_seconds,
        help="also run work_target: the work policy sizing the pool to finish the outstanding work in T seconds",
    )
    parser.add_argument(
        "--max-cost-per-hour",
        metavar="BUDGET",
        type=_positive_seconds,
        help="the cost policy's budget: the most all managers' workers may cost per hour together",
    )
    parser.add_argument("--json", action="store_true", help="print {policy: {worker_seconds, cost, p50, ...}}")
    parser.add_argument(
        "--boot-seconds",
        metavar="S",
        type=_seconds_or_zero,
        default=5.0,
        help="from a worker's launch to its connection, for managers that declare no expected_boot_seconds "
        "(default: 5)",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    offer_completion(parser)
    arguments = parser.parse_args(argv)
    try:
        output = _run(arguments)
    except _InputError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_CONFIGURATION
    print(output)
    return 0


class _InputError(Exception):
    """Input the user must fix; the message says what and where."""


def _run(arguments: argparse.Namespace) -> str:
    from scaler.policy.trace_csv import TraceFileError, parse_trace_csv
    from scaler.policy_simulator.cluster_simulation import SimulationSettings
    from scaler.policy_simulator.trace_replay import (
        DEFAULT_MANAGER,
        contenders,
        default_names,
        format_report,
        replay,
        report_json,
    )

    try:
        with open(arguments.trace, encoding="utf-8") as file:
            trace = parse_trace_csv(file.read(), arguments.trace)
    except (OSError, UnicodeDecodeError) as error:
        raise _InputError(f"cannot read trace file {arguments.trace}: {error}") from None
    except TraceFileError as error:
        raise _InputError(str(error)) from None
    config_policy = None
    managers: tuple[SimulatedManager, ...] = (replace(DEFAULT_MANAGER, boot_seconds=arguments.boot_seconds),)
    if arguments.config is not None:
        managers, config_policy = _stack(arguments.config, arguments.boot_seconds)
    names = arguments.policy or default_names(config_policy is not None, arguments.target_finish_seconds)
    try:
        chosen = contenders(
            names, managers, config_policy, arguments.target_finish_seconds, arguments.max_cost_per_hour
        )
    except ValueError as error:
        raise _InputError(str(error)) from None
    settings = SimulationSettings()
    rows = [replay(contender, trace, managers, settings) for contender in chosen]
    if arguments.json:
        return json.dumps(report_json(rows), indent=2)
    return format_report(arguments.trace, trace, managers, settings, rows)


def _stack(path: str, boot_seconds: float) -> tuple[tuple[SimulatedManager, ...], tuple[str, str] | None]:
    """The file's worker managers (ids resolved as `scaler FILE` resolves them) and its scheduler's policy."""
    from scaler.config.loader import ConfigError, load_launcher_file
    from scaler.policy_simulator.trace_replay import managers_of
    from scaler.worker_manager.registry import with_manager_id

    try:
        stack = load_launcher_file(path)
    except ConfigError as error:
        raise _InputError(str(error)) from None
    if not stack.worker_managers:
        raise _InputError(f"{path} has no [[worker_manager]] entry to replay the trace against")
    settings = [with_manager_id(manager) for manager in stack.worker_managers]
    try:
        managers = managers_of(settings, boot_seconds)
    except ValueError as error:
        raise _InputError(f"{path}: per_worker_capabilities: {error}") from None
    policy = None
    if stack.scheduler is not None:
        policy = (stack.scheduler.policy_engine_type, stack.scheduler.policy_content)
    return managers, policy


def _positive_seconds(text: str) -> float:
    """A finite number > 0 (seconds, or a budget)."""
    value = _seconds_or_zero(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number > 0")
    return value


def _seconds_or_zero(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


if __name__ == "__main__":
    raise SystemExit(main())
