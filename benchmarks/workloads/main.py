"""Runs one workload for one system and prints one line: `BENCH-RESULT {json}`.

Run by `benchmarks/run.py` with the system's own venv python, one fresh process per run:

    .venvs/<system>/bin/python workloads/main.py --system opengris --workload W1 --log-dir DIR [--quick]
    .venvs/<system>/bin/python workloads/main.py --system opengris --check

The result line is printed as soon as the measurement is done, before the cluster is torn down, so a teardown
that hangs does not lose it. Failures are tracebacks on stderr and a non-zero exit code.
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Worker processes of every system must import `bench_tasks` by name, as they would a user's module. They
# inherit the environment, so this has to happen before any cluster starts.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
# One thread per numerical library in every process of every system (Ray sets this for its workers itself): each
# worker runs one task at a time on a 2-core machine, and task CPU is measured per thread (day_tasks.py).
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import json  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

MARKER = "BENCH-RESULT "
DEFAULT_POLICY_CONTENT = "allocate=even_load; scaling=vanilla"


def emit(payload: dict[str, Any]) -> None:
    # One write call: cluster processes share this stdout and must not split the line.
    line = MARKER + json.dumps(payload) + "\n"
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line.encode())


def check(system: str) -> None:
    """Preflight: the system imports and exposes what the harness uses."""
    from adapters import make_adapter

    adapter = make_adapter(system, Path(tempfile.gettempdir()))
    if system == "dask":
        from distributed import Client, LocalCluster  # noqa: F401
    elif system == "ray":
        import ray  # noqa: F401
    else:
        from scaler import Client, SchedulerClusterCombo  # noqa: F401
    emit({"system": system, "version": adapter.version()})


def run(system: str, workload: str, quick: bool, log_dir: Path, policy_content: str) -> None:
    from adapters import make_adapter

    adapter = make_adapter(system, log_dir)
    header = {"system": system, "workload": workload, "quick": quick, "version": adapter.version()}
    if workload == "WS":
        import scaling

        metrics, details = scaling.run(log_dir, quick, policy_content)
        emit({**header, "metrics": metrics, "info": details})
        return

    import suite

    spec = suite.WORKLOADS[workload]
    size = (suite.QUICK_SIZES if quick else suite.FULL_SIZES)[workload]
    info: dict[str, Any] = {}
    try:
        if not spec.own_cluster:
            start = time.perf_counter()
            if spec.preimport:
                adapter.start(suite.N_WORKERS, spec.separate_scheduler, preimport=spec.preimport)
            else:
                adapter.start(suite.N_WORKERS, separate_scheduler=spec.separate_scheduler)
            info["warmup_seconds"] = suite.wait_for_workers(adapter, suite.N_WORKERS)
            info["start_seconds"] = time.perf_counter() - start
        metrics, details = spec.run(adapter, size)
        emit({**header, "metrics": metrics, "info": {**info, **details}})
    finally:
        adapter.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", required=True, choices=["ours", "ours-before", "opengris", "dask", "ray"])
    parser.add_argument("--workload", help="W1 ... W9 or WS")
    parser.add_argument("--check", action="store_true", help="only check that the system imports")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--log-dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--policy-content", default=DEFAULT_POLICY_CONTENT, help="WS scheduler policy")
    args = parser.parse_args()
    if args.check:
        check(args.system)
    elif args.workload:
        args.log_dir.mkdir(parents=True, exist_ok=True)
        run(args.system, args.workload, args.quick, args.log_dir, args.policy_content)
    else:
        parser.error("give --workload or --check")


if __name__ == "__main__":
    main()
