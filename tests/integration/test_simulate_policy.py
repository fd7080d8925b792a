"""`scaler_simulate_policy` as a user runs it: a real process on the example trace, a stack's TOML file, and
refusals that exit with 2 naming what is wrong. Each run is a second or two of simulated replays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parents[2]
BURST = ROOT / "examples" / "traces" / "burst.csv"
HEADER = (
    "| policy | worker-seconds | cost | launches | peak workers | p50 latency (s) | p95 latency (s) | max latency (s) "
    "| budget-capped (s) | unfinished |"
)


def simulate_policy(*arguments: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "scaler.entry_points.simulate_policy", *map(str, arguments)]
    return subprocess.run(command, capture_output=True, text=True, timeout=50, check=False, cwd=ROOT)


def rows(output: str) -> dict[str, list[str]]:
    """policy name -> its cells, from the printed table."""
    table = [line for line in output.splitlines() if line.startswith("| ") and not line.startswith("| policy")]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in table]
    return {row[0]: row[1:] for row in cells}


def test_every_policy_replays_the_example_trace() -> None:
    done = simulate_policy(BURST, "--target-finish-seconds", "30")
    assert done.returncode == 0, done.stderr
    assert HEADER in done.stdout
    table = rows(done.stdout)
    assert list(table) == ["vanilla", "capability", "work", "work_target", "cost", "waterfall_v1", "no"]
    assert all(row[-1] == "0" for row in table.values()), "every task finishes"
    worker_seconds = {name: float(row[0].replace(",", "")) for name, row in table.items()}
    assert worker_seconds["work_target"] < worker_seconds["work"]
    assert "work_target: work(tasks_per_worker=1, cooldown_seconds=15, target_finish_seconds=30)" in done.stdout


def test_a_stacks_managers_and_scheduler_policy() -> None:
    done = simulate_policy(BURST, "--config", ROOT / "config" / "waterfall_tiers.toml", "--policy", "config", "no")
    assert done.returncode == 0, done.stderr
    assert list(rows(done.stdout)) == ["config", "no"]
    assert (
        "managers: cheap (max 2, boot 5 s, 0.05/worker-hour), burst (max 4, boot 5 s, 0.2/worker-hour)" in done.stdout
    )
    assert "config: waterfall_v1(1:cheap; 2:burst; tasks_per_worker=1)" in done.stdout
    assert "no: no (fixed pools: cheap 2, burst 4)" in done.stdout


def test_the_cost_tiers_file_prices_each_policy_and_json_gives_the_same_figures() -> None:
    arguments = (ROOT / "benchmarks" / "traces" / "bursty.csv", "--config", ROOT / "config" / "cost_tiers.toml")
    done = simulate_policy(*arguments, "--policy", "work", "cost", "--max-cost-per-hour", "1")
    assert done.returncode == 0, done.stderr
    assert "spot (max 40, boot 60 s, 0.05/worker-hour), fargate (max 20, boot 5 s, 0.2/worker-hour)" in done.stdout
    table = rows(done.stdout)
    cost = {name: float(row[1]) for name, row in table.items()}
    capped = {name: float(row[-2].replace(",", "")) for name, row in table.items()}
    assert cost["cost"] < cost["work"], "the cost policy buys the cheap tier first"
    assert capped["cost"] > 0 and capped["work"] == 0, "a budget of 1/hour holds the bursts back"
    assert "cost: cost(tasks_per_worker=1, cooldown_seconds=15, max_cost_per_hour=1)" in done.stdout

    as_json = simulate_policy(*arguments, "--policy", "work", "cost", "--max-cost-per-hour", "1", "--json")
    assert as_json.returncode == 0, as_json.stderr
    figures = json.loads(as_json.stdout)
    assert set(figures) == {"work", "cost"}
    assert set(figures["cost"]) == {
        "worker_seconds", "cost", "p50", "p95", "max", "launches", "peak_workers", "capped_seconds", "unfinished"
    }  # fmt: skip
    assert figures["cost"]["cost"] == pytest.approx(cost["cost"], abs=0.01)
    assert figures["work"]["capped_seconds"] == 0 and figures["cost"]["capped_seconds"] > 0


def test_a_bad_trace_line_is_refused_with_its_file_and_line(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("arrival_seconds,duration_seconds\n0,1\n2,soon\n")
    done = simulate_policy(trace)
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"scaler_simulate_policy: error: {trace}, line 3: duration_seconds 'soon' is not a number"
    )
    assert done.stdout == ""


def test_a_missing_file_and_an_impossible_policy_are_refused() -> None:
    missing = simulate_policy("no-such-trace.csv")
    assert missing.returncode == 2
    assert "cannot read trace file no-such-trace.csv" in missing.stderr
    without_config = simulate_policy(BURST, "--policy", "config")
    assert without_config.returncode == 2
    assert "policy 'config' needs a --config file with a [scheduler] section" in without_config.stderr


def test_version() -> None:
    done = simulate_policy("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("scaler_simulate_policy ")
