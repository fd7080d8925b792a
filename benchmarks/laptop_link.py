"""The laptop's link (#42 goal 3): ours against Ray Client and a Dask client, each on loopback and behind the same
emulated link to its cluster (`scaler_link`: 40 ms round trip, 50 Mbit/s by default), as ratios from one run.

    python benchmarks/laptop_link.py                       # ours, dask, ray; full sizes
    python benchmarks/laptop_link.py --systems ours --quick
    python benchmarks/laptop_link.py --rtt-ms 80 --bandwidth 20Mbit --loss 0.001
    python benchmarks/laptop_link.py --bulk-only --rounds 3   # the 100 MB rows, the systems alternated 3 times
    SCALER_BENCH_BEFORE=/tmp/before python benchmarks/laptop_link.py --bulk-only --rounds 3 \
        --systems ours,ours-before,dask,ray                  # a change A/B: main's tree in /tmp/before beside it

Rows: W3 (a submit-and-wait round trip, p50), W1 (10,000 tiny tasks submitted one by one, then gathered), a map of
10,000, U3 (1,250 tasks, each with its own 100 KB argument) and a 100 MB object sent (put, then a task reads it) and
fetched (a task's 100 MB result read by the client). Each system runs in its own venv (benchmarks/harness/systems.py;
Ray's and Dask's clusters on this machine's loopback, their clients talking only to what a laptop reaches: Ray's
client server, Dask's scheduler). The goals: round trips within a few ms of the link's; maps and submits within a
handful of round trips of loopback; bulk data at 80% or more of the link's bandwidth; ahead of both peers on every
row. With `--rounds N` the systems take turns N times (ours, dask, ray, ours, ...) and the table shows each figure's
median (every round's figures are in the JSON). Results: benchmarks/results/laptop_link-<timestamp>.json; the
figures docs/performance.md shows ("Beyond one machine") come from it.
"""

import argparse
import datetime
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from harness import process
from harness.systems import BENCH_DIR, VenvError, ensure_venv

LAPTOP_MAIN = BENCH_DIR / "workloads" / "laptop.py"
SCALER_LINK = Path(sys.executable).parent / "scaler_link"
TIMEOUT_SECONDS = 1200.0
#: the venv each system runs in (benchmarks/harness/systems.py): Ray Client needs ray[client]
VENVS = {"ray": "ray-client", "ours-plain": "ours"}
#: row -> (title, figure key, how a value reads)
ROWS = {
    "W3": ("round trip (submit, result), p50", "W3_p50_ms", "ms"),
    "W1": ("10,000 submits, then gather", "W1_seconds", "s"),
    "map": ("map of 10,000", "map_seconds", "s"),
    "U3": ("1,250 tasks x 100 KB argument", "U3_seconds", "s"),
    "put": ("100 MB object sent, read by a task", "put_seconds", "s"),
    "get": ("100 MB result fetched", "get_seconds", "s"),
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--systems",
        default="ours,dask,ray",
        help="from ours, ours-plain (ours without CURVE, as the peers run), dask, ray and ours-before (our code at "
        "SCALER_BENCH_BEFORE's tree, to compare a change)",
    )
    parser.add_argument("--rtt-ms", type=float, default=40.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--bandwidth", default="50Mbit")
    parser.add_argument("--loss", type=float, default=0.0)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--bulk-only", action="store_true", help="only the 100 MB rows (put, get)")
    parser.add_argument("--rounds", type=int, default=1, help="times the systems take turns (medians are shown)")
    parser.add_argument("--python", default=sys.executable, help="interpreter the venvs are built from")
    parser.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results")
    return parser.parse_args()


def run_one(python: Path, system: str, link: bool, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    command = [str(python), str(LAPTOP_MAIN), "--system", system, "--log-dir", str(log_dir)]
    if link:
        command += ["--link", str(SCALER_LINK), "--rtt-ms", str(args.rtt_ms), "--jitter-ms", str(args.jitter_ms),
                    "--bandwidth", args.bandwidth, "--loss", str(args.loss)]  # fmt: skip
    if args.quick:
        command.append("--quick")
    if args.bulk_only:
        command.append("--bulk-only")
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
    outcome = process.run(command, TIMEOUT_SECONDS, env)
    if outcome.payload is None:
        return {"error": outcome.stderr_tail or f"exit code {outcome.returncode}"}
    return dict(outcome.payload)


def combined(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """One system's runs on one network: each figure's median over the rounds that gave one, and every round."""
    good = [outcome["figures"] for outcome in outcomes if "figures" in outcome]
    if not good:
        return {"error": outcomes[-1].get("error", "no figures"), "rounds": outcomes}
    keys = {key for figures in good for key in figures}
    medians = {key: statistics.median(figures[key] for figures in good if key in figures) for key in keys}
    return {"figures": medians, "rounds": outcomes}


def measured_round_trip(args: argparse.Namespace, pings: int = 200) -> float:
    """p50 of a 1-byte echo through the same link (ms): the link's round trip as this machine delivers it, the
    instrument's own floor that W3 is compared with."""
    import socket
    import subprocess
    import threading
    import time

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo() -> None:
        accepted, _ = server.accept()
        with accepted:
            while data := accepted.recv(64):
                accepted.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        listen = probe.getsockname()[1]
    command = [str(SCALER_LINK), f"tcp://127.0.0.1:{listen}=tcp://127.0.0.1:{port}", "--ports", "1", "--rtt-ms",
               str(args.rtt_ms), "--jitter-ms", str(args.jitter_ms), "--bandwidth", args.bandwidth]  # fmt: skip
    link = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert link.stdout is not None
        link.stdout.readline()
        try:
            os.setpriority(os.PRIO_PROCESS, link.pid, -5)
        except OSError:
            pass
        with socket.create_connection(("127.0.0.1", listen)) as client:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            times = []
            for _ in range(pings):
                start = time.perf_counter()
                client.sendall(b"x")
                client.recv(1)
                times.append(time.perf_counter() - start)
        return 1000 * sorted(times)[len(times) // 2]
    finally:
        link.terminate()
        link.wait(10)
        server.close()


def link_bits(text: str) -> float:
    sys.path.insert(0, str(BENCH_DIR.parent))
    from scaler_rehearsal.fake_cloud.link import parse_bandwidth

    return parse_bandwidth(text)


def table(results: dict[str, dict[str, Any]], args: argparse.Namespace, megabytes: int, echo_ms: float) -> list[str]:
    def figure(system: str, network: str, key: str) -> float | None:
        value = results.get(f"{system}/{network}", {}).get("figures", {}).get(key)
        return float(value) if value is not None else None

    bits = link_bits(args.bandwidth)
    before = "ours-before/link" in results  # the A/B of a change: our code at SCALER_BENCH_BEFORE's tree beside it
    lines = [
        f"link: {args.rtt_ms:g} ms round trip, jitter {args.jitter_ms:g} ms, {args.bandwidth}, loss {args.loss:g}; "
        f"a 1-byte echo through it takes {echo_ms:.1f} ms (p50) on this machine",
        "",
        "| row | ours, loopback | ours, link | link - loopback | dask, link | ray, link | ours vs dask | ours vs ray "
        + ("| ours-before, link | ours vs ours-before " if before else "")
        + "| goal |",
        "|---|---|---|---|---|---|---|---|---|" + ("---|---|" if before else ""),
    ]
    for title, key, unit in ROWS.values():
        ours_lo, ours = figure("ours", "loopback", key), figure("ours", "link", key)
        dask, ray = figure("dask", "link", key), figure("ray", "link", key)
        cells = [title, _show(ours_lo, unit), _show(ours, unit)]
        extra = None if ours is None or ours_lo is None else ours - ours_lo
        cells.append(_show(extra, unit))
        cells += [_show(dask, unit), _show(ray, unit), _ratio(dask, ours), _ratio(ray, ours)]
        if before:
            earlier = figure("ours-before", "link", key)
            cells += [_show(earlier, unit), _ratio(earlier, ours)]
        cells.append(_goal(key, ours, extra, args.rtt_ms, bits, megabytes, echo_ms))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def rounds_table(runs: dict[str, list[dict[str, Any]]], rounds: int) -> list[str]:
    """The 100 MB rows over the link, round by round (each system's figure and the load after its run)."""
    systems = [key.split("/")[0] for key in runs if key.endswith("/link")]
    heads = [f"{system}: {what}" for what in ("sent", "fetched") for system in systems]
    lines = ["", "| round | load | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(heads)]
    for turn in range(rounds):
        outcomes = [runs[f"{system}/link"][turn] for system in systems]
        loads = [outcome["load_average"] for outcome in outcomes]
        cells = [str(turn + 1), f"{min(loads):.1f}-{max(loads):.1f}"]
        for key in ("put_seconds", "get_seconds"):
            cells += [_show(outcome.get("figures", {}).get(key), "s") for outcome in outcomes]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _show(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.1f} ms" if unit == "ms" else f"{value:.2f} s"


def _ratio(theirs: float | None, ours: float | None) -> str:
    if theirs is None or ours is None or ours <= 0:
        return "-"
    return f"{theirs / ours:.3f}x" if 0.9 < theirs / ours < 1.1 else f"{theirs / ours:.1f}x"


def _goal(
    key: str, ours: float | None, extra: float | None, rtt_ms: float, bits: float, megabytes: int, echo_ms: float
) -> str:
    if ours is None:
        return "-"
    if key == "W3_p50_ms":
        return f"{ours - rtt_ms:+.1f} ms over the link's round trip ({ours - echo_ms:+.1f} ms over the echo)"
    if key in ("put_seconds", "get_seconds"):
        share = megabytes * 8e6 / ours / bits if bits else 0.0
        return f"{share:.0%} of the link's bandwidth" if bits else "-"
    if key == "U3_seconds":
        share = 1_250 * 100_000 * 8 / ours / bits if bits and megabytes == 100 else 0.0
        return f"{share:.0%} of the link's bandwidth" if share else "-"
    if extra is None:
        return "-"
    return f"{extra * 1000 / rtt_ms:.1f} round trips over loopback"


def main() -> None:
    args = parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    log_root = args.results_dir / f"laptop_link-{stamp}-logs"
    results: dict[str, dict[str, Any]] = {}
    pythons: dict[str, Path] = {}
    for system in systems:
        try:
            pythons[system] = ensure_venv(VENVS.get(system, system), args.python)
        except VenvError as error:
            results[f"{system}/loopback"] = results[f"{system}/link"] = {"error": str(error)}
    runs: dict[str, list[dict[str, Any]]] = {}
    for turn in range(args.rounds):
        for system, python in pythons.items():
            for network in ("loopback", "link"):
                print(f"[{system}, {network}, round {turn + 1}] ...", file=sys.stderr, flush=True)
                outcome = run_one(python, system, network == "link", args, log_root / system / network / str(turn))
                outcome["load_average"] = os.getloadavg()[0]
                runs.setdefault(f"{system}/{network}", []).append(outcome)
                print(json.dumps(outcome), file=sys.stderr, flush=True)
    results.update({key: combined(outcomes) for key, outcomes in runs.items()})
    megabytes = 10 if args.quick else 100
    echo_ms = measured_round_trip(args)
    results["echo"] = {"p50_ms": echo_ms}
    lines = table(results, args, megabytes, echo_ms)
    if args.rounds > 1:
        lines += rounds_table(runs, args.rounds)
    loads = [outcome["load_average"] for outcomes in runs.values() for outcome in outcomes]
    if loads:
        lines.insert(1, f"load average (1 min) after each run: {min(loads):.1f} to {max(loads):.1f}; "
                        f"{args.rounds} round(s), medians shown")  # fmt: skip
    print("\n".join(lines))
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"laptop_link-{stamp}.json"
    path.write_text(json.dumps({"link": vars(args) | {"results_dir": str(args.results_dir)}, "results": results,
                                "table": lines}, indent=2, default=str))  # fmt: skip
    print(f"\nresults: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
