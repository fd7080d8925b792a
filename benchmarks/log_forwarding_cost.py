"""What `Client.forward_logging` costs W1 (many tiny tasks) and W3 (sequential round trips): one local cluster,
three clients (forwarding off; on with tasks that log nothing; on with tasks that log one INFO record each),
runs alternated, median of `--repeat` runs each, reported as ratios to "off".

    python benchmarks/log_forwarding_cost.py [--tasks 2000] [--calls 200] [--repeat 5] [--workers 2]
"""

from __future__ import annotations

import logging

from harness.ab import alternated, medians, parse_arguments

from scaler import Client, SchedulerClusterCombo


def inc(value: int) -> int:
    return value + 1


def inc_logged(value: int) -> int:
    import logging

    logging.getLogger("bench.task").info("inc %d", value)
    return value + 1


def main() -> None:
    arguments = parse_arguments(__doc__ or "")
    logging.getLogger("bench").addHandler(logging.NullHandler())
    logging.getLogger("bench").propagate = False  # the forwarded records are handled, not printed
    with SchedulerClusterCombo(n_workers=arguments.workers) as cluster:
        off, on = Client(cluster.get_address()), Client(cluster.get_address())
        on.forward_logging("bench", logging.INFO)
        variants = {"off": (off, inc), "on, silent tasks": (on, inc), "on, 1 record/task": (on, inc_logged)}
        median = medians(alternated(variants, arguments.tasks, arguments.calls, arguments.repeat))
        off.disconnect()
        on.disconnect()
    for name in variants:
        cells = [f"{workload} {median[name][workload]:.3f} s ({median[name][workload] / median['off'][workload]:.3f})"
                 for workload in ("W1", "W3")]  # fmt: skip
        print(f"{name:>20}: " + ",  ".join(cells))


if __name__ == "__main__":
    main()
