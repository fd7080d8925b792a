"""U4's timeline: where the wall time of GridSearchCV(SVC) on `scaler.joblib` goes, on a fresh local cluster of 2
workers (as run.py measures U4). Each fit is wrapped to note when (wall clock) and in which processor it ran; the
backend's submits and result callbacks are noted in the client. Printed: the batches and their sizes, each
processor's busy time, the gaps between its fits, and the CPU each kind of process burnt.

    .venv/bin/python benchmarks/u4_timeline.py --rounds 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent / "workloads"))

import timeline_tasks
from u2_timeline import cpu_by_kind


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warm", action="store_true", help="also a second search on the same cluster")
    parser.add_argument(
        "--batch-seconds", default="",
        help="auto-batching's aim (joblib's MIN_IDEAL_BATCH_DURATION, 0.2 s), or several to alternate, e.g. 0.2,0.05 "
        "(a fresh cluster each); default: the backend's own",
    )  # fmt: skip
    return parser.parse_args()


def one_search(client: Any, me: psutil.Process, label: str) -> None:
    import joblib
    from sklearn.datasets import make_classification
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    import scaler.joblib  # noqa: F401
    from scaler.compat import joblib as backend_module

    x, y = make_classification(n_samples=1_500, n_features=20, random_state=29)
    grid = {"C": [0.1, 1.0, 10.0, 100.0], "gamma": [0.001, 0.01, 0.1, 1.0]}
    spans_file = tempfile.NamedTemporaryFile(prefix="u4-spans-", delete=False).name
    submits: list[tuple[float, int]] = []
    original = backend_module.ScalerBackend.submit

    def submit(self: Any, func: Any, callback: Any = None) -> Any:
        func.items = [(timeline_tasks.Traced(f, spans_file), a, k) for f, a, k in func.items]
        submits.append((time.time(), len(func.items)))
        return original(self, func, callback)

    backend_module.ScalerBackend.submit = submit  # type: ignore[method-assign]
    before = cpu_by_kind(me)
    start = time.time()
    try:
        with joblib.parallel_config(backend="scaler", client=client):
            GridSearchCV(SVC(), grid, cv=5, n_jobs=-1).fit(x, y)
    finally:
        backend_module.ScalerBackend.submit = original  # type: ignore[method-assign]
    done = time.time()
    after = cpu_by_kind(me)
    spans = [tuple(float(v) for v in line.split()) for line in open(spans_file)]
    os.unlink(spans_file)
    print(f"--- {label}: wall {done - start:.3f} s, load average {os.getloadavg()[0]:.1f}")
    print(f"  batches {len(submits)}, sizes {[size for _, size in submits]}")
    print(f"  submits at {[round(at - start, 3) for at, _ in submits[:8]]} ...")
    by_pid: dict[int, list[tuple[float, float]]] = {}
    for began, ended, pid in spans:
        by_pid.setdefault(int(pid), []).append((began, ended))
    for pid, runs in sorted(by_pid.items()):
        runs.sort()
        busy = sum(ended - began for began, ended in runs)
        gaps = sorted(runs[i + 1][0] - runs[i][1] for i in range(len(runs) - 1))
        print(
            f"  processor {pid}: {len(runs)} fits, busy {busy:.3f} s from {runs[0][0] - start:.3f} to "
            f"{runs[-1][1] - start:.3f}; first fit {runs[0][1] - runs[0][0]:.3f} s; gaps sum {sum(gaps):.3f}, "
            f"median {gaps[len(gaps) // 2] * 1000 if gaps else 0:.2f} ms, max {max(gaps, default=0) * 1000:.1f} ms"
        )
    last = max(ended for _, ended, _ in spans)
    ends = sorted(runs[-1][1] for runs in by_pid.values())
    print(
        f"  last fit ended {last - start:.3f} ({(ends[-1] - ends[0]) * 1000:.0f} ms after the other processor's); "
        f"search returned {done - start:.3f}"
    )
    cpu = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    print("  CPU s: " + ", ".join(f"{name} {value:.2f}" for name, value in sorted(cpu.items()) if value > 0.005))


def main() -> None:
    from scaler import Client, SchedulerClusterCombo

    args = parse_args()
    timeline_tasks.importable_by_workers()
    me = psutil.Process()
    print(sys.prefix)
    from scaler.compat.joblib import ScalerBackend

    targets = [float(value) for value in args.batch_seconds.split(",")] if args.batch_seconds else [0.0]
    for number, target in [(number, target) for number in range(1, args.rounds + 1) for target in targets]:
        if target:
            ScalerBackend.MIN_IDEAL_BATCH_DURATION = target
        cluster = SchedulerClusterCombo(n_workers=2, logging_level="WARNING")
        client = Client(address=cluster.get_address())
        try:
            seen: set[int] = set()
            while len(seen) < 2:  # as run.py's warm-up: both processors have run a task
                seen.update(f.result() for f in [client.submit(timeline_tasks.pid_after, 0.05) for _ in range(4)])
            one_search(
                client,
                me,
                f"round {number}, batches aimed at {ScalerBackend.MIN_IDEAL_BATCH_DURATION} s, fresh processors",
            )
            if args.warm:
                one_search(
                    client,
                    me,
                    f"round {number}, batches aimed at {ScalerBackend.MIN_IDEAL_BATCH_DURATION} s, warm processors",
                )
        finally:
            client.disconnect()
            cluster.shutdown()


if __name__ == "__main__":
    main()
