"""What each workload reports, how to read its numbers, how long it may take, and the targets from the issue."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Metric:
    key: str
    unit: str
    higher_is_better: bool
    better: str = "faster"  # "ours is 12.3x faster"
    worse: str = "slower"


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    title: str
    metrics: tuple[Metric, ...]
    timeout_seconds: float
    systems: tuple[str, ...] = ("ours", "opengris", "dask", "ray")


SECONDS = Metric("seconds", "s", higher_is_better=False)
THROUGHPUT = Metric("tasks_per_s", "tasks/s", higher_is_better=True)
#: the workloads shaped like users' days: wall time, task CPU over all CPU, the run's peak memory (the largest sum over
#: its processes at one sample, PSS and RSS), and the sum/largest of per-process peak PSS/RSS (procs.TreeSampler)
DAY_METRICS = (
    SECONDS,
    Metric("cpu_efficiency", "", True, "more efficient", "less efficient"),
    Metric("peak_pss_total_mb", "MB", False, "smaller", "larger"),
    Metric("peak_rss_total_mb", "MB", False, "smaller", "larger"),
    Metric("peak_pss_sum_mb", "MB", False, "smaller", "larger"),
    Metric("peak_rss_sum_mb", "MB", False, "smaller", "larger"),
    Metric("peak_rss_max_mb", "MB", False, "smaller", "larger"),
)

WORKLOADS: dict[str, WorkloadSpec] = {
    "W1": WorkloadSpec("10,000 tiny tasks: submit one by one, then gather", (THROUGHPUT,), 300),
    "W2": WorkloadSpec("map over 10,000 items", (THROUGHPUT,), 300),
    "W3": WorkloadSpec(
        "500 sequential submit(inc, i).result() round trips",
        (Metric("p50_ms", "ms", False), Metric("p99_ms", "ms", False)),
        120,
    ),
    "W4": WorkloadSpec("binary-tree reduction, 1,024 leaves = 2,047 tasks, one graph", (SECONDS,), 300),
    "W5": WorkloadSpec("one 100 MB object sent once, read by 20 tasks", (SECONDS,), 180),
    "W6": WorkloadSpec(
        "8 tasks x 0.5 s CPU on 2 workers: ideal 2.0 s / wall time",
        (Metric("efficiency", "", True, "more efficient", "less efficient"),),
        120,
    ),
    "W7": WorkloadSpec(
        "scheduler peak RSS during W1",
        (Metric("peak_rss_mb", "MB", False, "smaller", "larger"),),
        300,
        systems=("ours", "opengris", "dask"),  # Ray has no one scheduler process (GCS, raylet)
    ),
    "W8": WorkloadSpec("cluster start to first result", (SECONDS,), 120),
    "W9": WorkloadSpec("nested tasks: fibonacci(8) submitting from tasks (67 tasks)", (SECONDS,), 120),
    "U1": WorkloadSpec("Monte Carlo: 5,000 tasks of ~2 ms numpy reading one 50 MB array sent once", DAY_METRICS, 300),
    "U2": WorkloadSpec(
        "dataframe fan-out: 250 pandas partitions made, grouped, aggregated (one graph)", DAY_METRICS, 180
    ),
    "U3": WorkloadSpec("1,250 tasks, each with its own 100 KB bytes argument", DAY_METRICS, 180),
    "U4": WorkloadSpec(
        "scikit-learn GridSearchCV(SVC), 16 candidates x 5 folds, on the joblib backend",
        DAY_METRICS,
        300,
        systems=("ours", "dask", "ray"),  # opengris-scaler 2.9 has no joblib backend
    ),
    "U4p": WorkloadSpec(
        "U4 on workers that imported scikit-learn at start (preimport / Dask preload / Ray setup hook)",
        DAY_METRICS,
        300,
        systems=("ours", "dask", "ray"),
    ),
    "WS": WorkloadSpec(
        "scaling from zero: 100 x sleep(0.1) on a dynamic manager, max 8 workers",
        (
            Metric("first_result_s", "s", False),
            Metric("total_s", "s", False),
            Metric("worker_start_up_s", "s", False),
            Metric("total_over_ideal_plus_start_up", "x", False, "closer to ideal", "further from ideal"),
            Metric("scale_down_s", "s", False),
        ),
        420,
        systems=("ours", "opengris"),
    ),
}


@dataclasses.dataclass(frozen=True)
class Target:
    """ours/baseline must be >= factor (higher-is-better metric) or <= factor (lower-is-better). Without a
    baseline the metric of ours itself must be <= factor."""

    workload: str
    metric: str
    baseline: str | None
    factor: float
    text: str


TARGETS: tuple[Target, ...] = (
    Target("W1", "tasks_per_s", "opengris", 10.0, ">= 10x opengris"),
    Target("W1", "tasks_per_s", "dask", 25.0, ">= 25x dask (#29)"),
    Target("W2", "tasks_per_s", "opengris", 25.0, ">= 25x opengris"),
    Target("W3", "p50_ms", "opengris", 1 / 4, "p50 <= 1/4 of opengris"),
    Target("W4", "seconds", "opengris", 1 / 5, "<= 1/5 of opengris"),
    Target("W5", "seconds", "opengris", 1 / 3, "<= 1/3 of opengris"),
    Target("W7", "peak_rss_mb", "opengris", 1.0, "<= opengris"),
    Target("W8", "seconds", "opengris", 1 / 2, "<= 1/2 of opengris"),
    Target("W9", "seconds", "opengris", 1 / 10, "<= 1/10 of opengris"),
    Target("U1", "seconds", "ray", 1 / 1.5, "<= 1/1.5 of ray"),
    Target("U1", "cpu_efficiency", None, 0.85, ">= 0.85 (task CPU / all CPU)"),
    Target("U1", "peak_pss_total_mb", "dask", 1.0, "PSS <= dask (#40)"),
    Target("U2", "seconds", "ray", 1 / 1.5, "<= 1/1.5 of ray"),
    Target("U3", "seconds", "ray", 1 / 1.5, "<= 1/1.5 of ray"),
    Target("U4", "seconds", "ray", 1 / 1.5, "<= 1/1.5 of ray"),
    Target("WS", "total_over_ideal_plus_start_up", None, 1.5, "total <= 1.5 x (ideal + one worker start-up)"),
)
