"""What each task's story costs W1 (many tiny tasks) and W3 (sequential round trips): two local clusters, one with
stories on (the default) and one with `story_retention_tasks=0` (off: the scheduler records nothing; processors
still stamp their start and end on each result), runs alternated, median of `--repeat` runs each, reported as
ratios to "off".

    python benchmarks/story_cost.py [--tasks 2000] [--calls 200] [--repeat 5] [--workers 2]
"""

from __future__ import annotations

from harness.ab import alternated, medians, parse_arguments

from scaler import Client, SchedulerClusterCombo


def inc(value: int) -> int:
    return value + 1


def main() -> None:
    arguments = parse_arguments(__doc__ or "")
    with (
        SchedulerClusterCombo(n_workers=arguments.workers, logging_level="WARNING") as on_cluster,
        SchedulerClusterCombo(n_workers=arguments.workers, logging_level="WARNING", story_retention_tasks=0) as off,
    ):
        clients = {"on": Client(on_cluster.get_address()), "off": Client(off.get_address())}
        times = alternated({name: (client, inc) for name, client in clients.items()}, arguments.tasks,
                           arguments.calls, arguments.repeat)  # fmt: skip
        for client in clients.values():
            client.disconnect()
    median = medians(times)
    for workload in ("W1", "W3"):
        off_median, on_median = median["off"][workload], median["on"][workload]
        spread = ", ".join(f"{value:.3f}" for value in times["on"][workload])
        print(
            f"{workload}: off {off_median:.3f} s, on {on_median:.3f} s, ratio {on_median / off_median:.3f}"
            f" (on runs: {spread})"
        )


if __name__ == "__main__":
    main()
