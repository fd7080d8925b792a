"""The progress bar's cost: a 100,000-item map of a tiny function on a local cluster, with and without
`progress=True`, alternated, median of `--repeat` runs each. The bar draws to stderr (here: /dev/null, as a
terminal would cost more only in the terminal).

    python benchmarks/progress_cost.py [--items 100000] [--repeat 5] [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time

from scaler import Client, SchedulerClusterCombo


def inc(value: int) -> int:
    return value + 1


def one_map(client: Client, items: int, progress: bool) -> float:
    began = time.perf_counter()
    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        results = client.map(inc, range(items), progress=progress)
    elapsed = time.perf_counter() - began
    assert results[-1] == items
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    arguments = parser.parse_args()
    plain: list[float] = []
    with_bar: list[float] = []
    with SchedulerClusterCombo(n_workers=arguments.workers) as cluster, Client(cluster.get_address()) as client:
        one_map(client, arguments.items, False)  # warm-up: workers' imports, the function's first shipment
        one_map(client, arguments.items, True)  # and tqdm's import
        for _ in range(arguments.repeat):
            plain.append(one_map(client, arguments.items, False))
            with_bar.append(one_map(client, arguments.items, True))
    a, b = statistics.median(plain), statistics.median(with_bar)
    print(f"{arguments.items} items, {arguments.workers} workers, median of {arguments.repeat}")
    print(f"without the bar: {a:.3f} s   with the bar: {b:.3f} s   cost: {100 * (b - a) / a:+.1f}%")


if __name__ == "__main__":
    main()
