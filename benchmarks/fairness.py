"""Two clients map 10,000 tiny tasks each at the same moment: do both progress, or does one wait for the other?

    python benchmarks/fairness.py [--tasks 10000] [--workers 2] [--stagger 0.5]

Client B starts STAGGER seconds after A (0: together). Prints when each client's map finished, when its first
result came, and, of the first half of all results, each client's share (0.5 each when they take turns; near
1.0 / 0.0 when B waits for A's backlog). Not a test.
"""

from __future__ import annotations

import argparse
import threading
import time

from scaler import Client, SchedulerClusterCombo


def inc(x: int) -> int:
    return x + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--stagger", type=float, default=0.5)
    arguments = parser.parse_args()
    lock = threading.Lock()
    completions: list[str] = []
    finished: dict[str, float] = {}
    first: dict[str, float] = {}
    start = threading.Barrier(2)
    began = [0.0]

    def one_client(name: str, address: str) -> None:
        with Client(address=address) as client:
            start.wait()
            if name == "B":
                time.sleep(arguments.stagger)
            began[0] = began[0] or time.monotonic()
            futures = [client.submit(inc, i) for i in range(arguments.tasks)]
            for future in futures:
                future.add_done_callback(lambda _f: _record(name))
            assert [f.result() for f in futures] == [i + 1 for i in range(arguments.tasks)]
            finished[name] = time.monotonic() - began[0]

    def _record(name: str) -> None:
        with lock:
            completions.append(name)
            first.setdefault(name, time.monotonic() - began[0])

    with SchedulerClusterCombo(n_workers=arguments.workers) as cluster:
        threads = [threading.Thread(target=one_client, args=(n, cluster.get_address())) for n in ("A", "B")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    first_half = completions[: len(completions) // 2]
    print(f"two clients x {arguments.tasks:,} tasks on {arguments.workers} workers, B {arguments.stagger:g} s later")
    for name in ("A", "B"):
        share = first_half.count(name) / len(first_half)
        print(f"  client {name}: first result after {first[name]:.2f} s, map done after {finished[name]:.2f} s; "
              f"{share:.0%} of the first half of results")  # fmt: skip


if __name__ == "__main__":
    main()
