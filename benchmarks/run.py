"""Side-by-side benchmark: the same workloads against ours, opengris-scaler 2.9.0 and dask.distributed.

    python benchmarks/run.py                                  # everything, 3 rounds
    python benchmarks/run.py --systems opengris,dask --workloads W1,W3 --repeat 5
    python benchmarks/run.py --systems ours --quick           # smoke run with small sizes
    SCALER_BENCH_BEFORE=/tmp/before python benchmarks/run.py --systems ours,ours-before --workloads W1,W3,W9
                                                              # a change before/after (/tmp/before: a worktree)

Each system lives in its own venv under benchmarks/.venvs/ (built on first use). Each run is a fresh process
of that venv's python running benchmarks/workloads/main.py, which starts its own 2-worker local cluster and
prints one JSON result line. Systems alternate run by run. Raw results: benchmarks/results/<timestamp>.json.
benchmarks/README.md says which runs make the figures of docs/performance.md.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import process, report
from harness.spec import WORKLOADS
from harness.systems import BENCH_DIR, REPO_ROOT, SYSTEMS, WORKLOAD_MAIN, VenvError, ensure_venv

#: WS runs each system with its recommended policy: ours the work-based one (docs/scaling.md),
#: opengris-scaler its vanilla one (it has no work-based policy).
DEFAULT_POLICY_CONTENT = "allocate=even_load; scaling=work"
ANCHOR_POLICY_CONTENT = "allocate=even_load; scaling=vanilla"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated, from: %(default)s")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, from: %(default)s")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; systems alternate within each round")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--python", default=sys.executable, help="interpreter the venvs are built from")
    parser.add_argument("--policy-content", default=DEFAULT_POLICY_CONTENT, help="WS --policy-content of ours")
    parser.add_argument(
        "--anchor-policy-content", default=ANCHOR_POLICY_CONTENT, help="WS --policy-content of opengris-scaler"
    )
    parser.add_argument(
        "--quiet-threshold", type=float, default=0.25, help="before each run, wait until the machine is less busy"
    )
    parser.add_argument("--quiet-wait", type=float, default=20.0, help="longest such wait in seconds (0: never)")
    parser.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    args = parser.parse_args()
    args.systems = _choices(parser, args.systems, SYSTEMS, "system")
    args.workloads = _choices(parser, args.workloads, tuple(WORKLOADS), "workload")
    return args


def _choices(parser: argparse.ArgumentParser, text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    chosen = [item.strip() for item in text.split(",") if item.strip()]
    for item in chosen:
        if item not in allowed:
            parser.error(f"unknown {what} {item!r}; choose from {', '.join(allowed)}")
    return chosen


def subprocess_env() -> dict[str, str]:
    """The driver's environment without anything that would leak our own venv into another system's."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}


def prepare(systems: list[str], base_python: str) -> dict[str, dict[str, Any]]:
    """Builds each venv and checks that the system imports. Returns per system: python, version or error."""
    prepared: dict[str, dict[str, Any]] = {}
    for system in systems:
        try:
            python = ensure_venv(system, base_python)
        except VenvError as error:
            prepared[system] = {"available": False, "error": str(error)}
            continue
        check = process.run([str(python), str(WORKLOAD_MAIN), "--system", system, "--check"], 180, subprocess_env())
        if check.payload is None:
            prepared[system] = {"available": False, "error": check.stderr_tail or f"exit code {check.returncode}"}
        else:
            prepared[system] = {"available": True, "python": str(python), "version": check.payload["version"]}
            if system == "ours":
                prepared[system]["git"] = git_state()
    for system, state in prepared.items():
        status = f"version {state['version']}" if state["available"] else "NOT AVAILABLE, skipped:\n" + state["error"]
        print(f"[setup] {system}: {status}", flush=True)
    return prepared


def git_state() -> dict[str, Any]:
    """Which code `ours` was: the repository's commit and how many files differ from it (read-only git calls)."""

    def git(*arguments: str) -> str:
        result = subprocess.run(["git", "-C", str(REPO_ROOT), *arguments], capture_output=True, text=True)
        return result.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "changed_files": len(git("status", "--porcelain").splitlines())}


def run_one(args: argparse.Namespace, python: str, system: str, workload: str, log_dir: Path) -> dict[str, Any]:
    command = [python, str(WORKLOAD_MAIN), "--system", system, "--workload", workload, "--log-dir", str(log_dir)]
    policy = args.policy_content if system.startswith("ours") else args.anchor_policy_content
    command += ["--policy-content", policy] + (["--quick"] if args.quick else [])
    busy_before = process.wait_until_quiet(args.quiet_threshold, args.quiet_wait) if args.quiet_wait > 0 else None
    outcome = process.run(command, WORKLOADS[workload].timeout_seconds, subprocess_env())
    payload = outcome.payload or {}
    return {
        "system": system,
        "workload": workload,
        "status": outcome.status,
        "returncode": outcome.returncode,
        "wall_seconds": outcome.wall_seconds,
        "metrics": payload.get("metrics", {}),
        "info": payload.get("info", {}),
        "version": payload.get("version"),
        "machine_busy_before": busy_before,
        "foreign_cpu_fraction": outcome.foreign_cpu_fraction,
        "stderr_tail": outcome.stderr_tail if outcome.status != "ok" or outcome.returncode != 0 else "",
        "log_dir": str(log_dir),
    }


def progress(record: dict[str, Any], round_index: int, repeat: int) -> str:
    head = f"[{round_index}/{repeat}] {record['workload']:3} {record['system']:8}"
    foreign = record["foreign_cpu_fraction"]
    tail = f"({record['wall_seconds']:.1f} s" + (f", foreign CPU {100 * foreign:.0f}%)" if foreign is not None else ")")
    if record["status"] != "ok":
        stderr = "\n".join("      " + line for line in record["stderr_tail"].splitlines()[-12:])
        return f"{head} {record['status'].upper()} {tail}\n{stderr}"
    values = "  ".join(f"{key}={report.fmt(value)}" for key, value in record["metrics"].items())
    returncode = record["returncode"]
    after = "timeout" if returncode is None else f"exit {returncode}"
    warning = "" if returncode == 0 else f"  [after the result: {after}]"
    return f"{head} {values} {tail}{warning}" + memory_by_kind(record["info"])


def memory_by_kind(info: dict[str, Any]) -> str:
    """The workloads shaped like users' days: each kind of process's peak PSS and RSS (per-process peaks, summed
    over the processes of that kind), and what the memory sampling itself cost."""
    kinds = info.get("by_kind") or []
    lines = [
        f"      {row['process'][:48]:48} x{row['count']:<3}"
        f" PSS {row['peak_pss_mb']:7.1f} MB  RSS {row['peak_rss_mb']:7.1f} MB"
        for row in kinds
    ]
    cost = info.get("sampler")
    if cost:
        lines.append(
            f"      (sampler: {cost['samples']} samples every {cost['interval_s']} s, {cost['pss_samples']} of them"
            f" with PSS, {cost['cpu_ms_per_sample']} ms CPU"
            f" and {cost['wall_ms_per_sample']} ms wall each, {cost['cpu_s']} s CPU in all, not counted in all_cpu_s)"
        )
    return "".join("\n" + line for line in lines)


def main() -> int:
    args = parse_args()
    process.become_subreaper()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    results_file = args.results_dir / f"{stamp}.json"
    prepared = prepare(args.systems, args.python)
    document: dict[str, Any] = {
        "started": stamp,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "arguments": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "systems": prepared,
        "runs": [],
    }
    for round_index in range(1, args.repeat + 1):
        for workload in args.workloads:
            for system in args.systems:
                kind = "ours" if system == "ours-before" else system  # the same workloads as ours
                if not prepared[system]["available"] or kind not in WORKLOADS[workload].systems:
                    continue
                log_dir = args.results_dir / f"{stamp}-logs" / f"{round_index}-{workload}-{system}"
                record = run_one(args, prepared[system]["python"], system, workload, log_dir)
                record["round"] = round_index
                document["runs"].append(record)
                print(progress(record, round_index, args.repeat), flush=True)
                results_file.write_text(json.dumps(document, indent=1))
    document["summary"] = report.summarize(document["runs"], args.systems, args.workloads)
    results_file.write_text(json.dumps(document, indent=1))
    if args.quick:
        print("\nQUICK RUN: small sizes (workloads/suite.py QUICK_SIZES), the titles below give the full sizes.")
    print("\n" + report.format_summary(document["summary"]))
    print(f"raw results: {results_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
