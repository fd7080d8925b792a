"""A timeline of ours' shuffle on the rig (issue 74): which host made which partition and when, when each reducer had
its inputs and ended, and each host's link over time, so that a change aims at what sets the shuffle's time.

    .venv/bin/python benchmarks/rig/shuffle_timeline.py [--runs 2] [--keep-logs DIR]

As root, from the repository's root. Starts this tree's stack (its own environment's commands) on a fresh rig of a
storage host, a client host and 4 worker hosts x 2 slots, 100 Mbit/s links (as benchmarks/rig_hosts.py does), runs a
warm shuffle (none with `--cold`), then `--runs` shuffles, each timed from the graph's submission. The tasks note on
themselves where and when they ran: a maker writes its host and times into its partition's first floats, the reducer
returns them beside its own (its start is when its inputs had come). Each host's bytes are sampled every 0.1 s
meanwhile; the link's rate per 0.5 s is printed per host. Prints the timeline (and keeps it with `--keep-logs`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parent)]

from tests.rig import MBIT, Rig  # noqa: E402
from tests.rig.stack import RigStack  # noqa: E402

CLIENT = r"""
import json, socket, sys, time
import numpy as np
from scaler import Client

def host_code():
    return float(int.from_bytes(socket.gethostname().encode()[:6].ljust(6, b" "), "big"))

def make(seed, size):
    began = time.time()
    part = np.full(size // 8, float(seed))
    part[1], part[3] = began, host_code()
    part[2] = time.time()
    return part

def reduce_parts(*parts):
    began = time.time()
    total = float(sum(part[0] for part in parts))
    makers = [[float(part[0]), float(part[3]), float(part[1]), float(part[2])] for part in parts]
    return {"sum": total, "host": host_code(), "began": began, "ended": time.time(), "makers": makers}

def shuffle(client, hosts, size, tag):
    graph = {f"part-{tag}-{i}-{j}": (make, i * hosts + j, size) for i in range(hosts) for j in range(hosts)}
    graph.update({f"reduce-{tag}-{j}": (reduce_parts, *[f"part-{tag}-{i}-{j}" for i in range(hosts)])
                  for j in range(hosts)})
    submitted = time.time()
    reduced = client.get(graph, [f"reduce-{tag}-{j}" for j in range(hosts)])
    return {"submitted": submitted, "ended": time.time(),
            "reducers": [reduced[f"reduce-{tag}-{j}"] for j in range(hosts)]}

address, hosts, size, runs, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
with Client(address=address) as client:
    client.submit(make, 0, 64).result()
    if warm == "warm":
        shuffle(client, hosts, size, "warm")
        time.sleep(3.0)
    out = []
    for run in range(runs):
        out.append(shuffle(client, hosts, size, f"r{run}"))
        time.sleep(8.0)  # the uploads of the run before end
print(json.dumps(out))
"""


def host_name(code: float) -> str:
    return int(code).to_bytes(6, "big").decode().strip()


class LinkSampler:
    def __init__(self, rig: Rig, interval: float = 0.1) -> None:
        self._rig, self._interval = rig, interval
        self.samples: list[tuple[float, dict[str, tuple[int, int]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            counts = self._rig.link_bytes()
            self.samples.append((time.time(), {name: (c.sent, c.received) for name, c in counts.items()}))
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def rates(samples: list[tuple[float, dict[str, tuple[int, int]]]], start: float, end: float, step: float,
          hosts: list[str]) -> list[str]:  # fmt: skip
    """Each host's MB sent/received per `step` seconds from `start` to `end`."""
    rows = []
    edge = start
    while edge < end:
        window = [sample for sample in samples if edge <= sample[0] < edge + step]
        if len(window) >= 2:
            first, last = window[0][1], window[-1][1]
            span = window[-1][0] - window[0][0] or step
            cells = []
            for name in hosts:
                sent = (last[name][0] - first[name][0]) / span / 1e6
                received = (last[name][1] - first[name][1]) / span / 1e6
                cells.append(f"{name}:{sent:5.1f}/{received:5.1f}")
            rows.append(f"  {edge - start:5.1f}s  " + "  ".join(cells))
        edge += step
    return rows


def report(run: dict[str, Any], samples: list[tuple[float, dict[str, tuple[int, int]]]], hosts: list[str]) -> str:
    t0 = run["submitted"]
    lines = [f"shuffle: {run['ended'] - t0:.2f} s"]
    made: dict[str, list[int]] = {}
    for reducer in run["reducers"]:
        for seed, code, began, ended in reducer["makers"]:
            made.setdefault(host_name(code), []).append(int(seed))
            lines.append(f"  maker {int(seed):2d} on {host_name(code)}: {began - t0:5.2f} - {ended - t0:5.2f}")
    lines.append("  makers per host: " + ", ".join(f"{name} {len(seeds)}" for name, seeds in sorted(made.items())))
    for reducer in run["reducers"]:
        sources = [host_name(code) for _, code, _, _ in reducer["makers"]]
        lines.append(f"  reducer on {host_name(reducer['host'])} (inputs from {', '.join(sources)}): inputs by "
                     f"{reducer['began'] - t0:5.2f}, ended {reducer['ended'] - t0:5.2f}")  # fmt: skip
    first = [s for s in samples if s[0] <= t0]
    last = [s for s in samples if s[0] <= run["ended"]]
    if first and last:
        lines.append("  MB sent/received during it: " + ", ".join(
            f"{name} {(last[-1][1][name][0] - first[-1][1][name][0]) / 1e6:.0f}/"
            f"{(last[-1][1][name][1] - first[-1][1][name][1]) / 1e6:.0f}" for name in hosts))  # fmt: skip
    lines.append("  each host's link, MB/s sent/received per 0.5 s:")
    lines += rates(samples, t0, run["ended"] + 4.0, 0.5, hosts)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--cold", action="store_true", help="no warm shuffle first (as the rig benchmark's first)")
    parser.add_argument("--worker-hosts", type=int, default=4)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--keep-logs", type=Path, default=None, help="copy the stack's logs here")
    parser.add_argument("--bin-dir", type=Path, default=Path(sys.executable).parent, help="the stack's commands")
    args = parser.parse_args()
    args.bin_dir = args.bin_dir.absolute()  # the hosts start it from the rig's folder
    workers = [f"w{index}" for index in range(1, args.worker_hosts + 1)]
    hosts = ["storage", *workers]
    config_home = tempfile.mkdtemp(prefix="rig-timeline-config-")
    workdir = Path(tempfile.mkdtemp(prefix="rig-timeline-", dir="/work"))
    os.environ["XDG_CONFIG_HOME"] = config_home
    try:
        with Rig.open(["storage", "client", *workers], workdir, rate_bits=100 * MBIT) as rig:
            stack = RigStack.start(rig, "storage", dict.fromkeys(workers, args.slots), bin_dir=args.bin_dir)
            sampler = LinkSampler(rig)
            try:
                out = stack.run_script("client", CLIENT, str(args.worker_hosts), str(args.size), str(args.runs),
                                       "cold" if args.cold else "warm", timeout_seconds=600)  # fmt: skip
            finally:
                sampler.stop()
                stack.stop()
                if args.keep_logs is not None:
                    shutil.copytree(rig.log_dir, args.keep_logs, dirs_exist_ok=True)
            text = "\n".join(report(run, sampler.samples, hosts) for run in out)
            print(text, flush=True)
            if args.keep_logs is not None:
                (args.keep_logs / "timeline.txt").write_text(text)
                (args.keep_logs / "timeline.json").write_text(json.dumps({"runs": out, "samples": sampler.samples}))
    finally:
        shutil.rmtree(config_home, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
