"""The measurements of a scale run, one function per axis; each starts its own scheduler and fleets and ends them.

Every figure is the scheduler process's own (psutil: its CPU seconds, user + system, all its threads; its RSS),
never the machine's, so the fleets and other work on the machine change the wall time of a run, not its figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shlex
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scale import callgrind
from scale.processes import Fleet, Scheduler
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC

HEARTBEAT_SECONDS = 2.0
SETTLE_SECONDS = 6.0  #: after the fleet registered: its first heartbeats spread, registration's work done
#: Tasks a client keeps unanswered while the CPU per task is measured (a map keeps 128 chunks or more in flight;
#: fixed, so that every size of the cluster is offered the same load).
WINDOW = 20_000
DRAIN_WAIT_SECONDS = 8.0  #: after the last answer and the clients' leaving: the scheduler's memory return runs
#: after the status shows every task queued: the queue as it is held (the shell's trim once an intake pauses runs
#: within two of its status intervals of 1 s)
QUEUED_SETTLE_SECONDS = 3.0


@dataclass
class Settings:
    logs: Path
    tasks: int = 100_000
    idle_seconds: float = 20.0
    capacity: int = 2
    #: task windows run one after the other by each scheduler, `tasks` each: a CPU-per-task figure is their median
    #: (one window's figure moves by a third between runs of one tree on this machine; the first window also pays
    #: for the heap's first growth)
    windows: int = 1
    #: clients connected on the workers axis, each heartbeating (and sharing its tasks): 1, or 100 (an echo to each
    #: client's heartbeat once counted the workers a task can go to by walking them all)
    workers_axis_clients: int = 1


def links_for(workers: int) -> int:
    """How many of `workers` fake workers open a processor's link: all, unless the scheduler would then hold more
    connections than its descriptors allow (a worker and its link are two; 1,000 kept for the rest): 10,000 workers
    under a limit of 20,000 get 9,000 links."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return max(0, min(workers, limit - workers - 1000))


@contextlib.contextmanager
def cluster(settings: Settings, name: str, workers: int, clients: int) -> Iterator[tuple[Scheduler, Fleet, Fleet]]:
    """A scheduler with a fleet of `workers` fake workers and one of `clients` fake clients, registered."""
    settings.logs.mkdir(parents=True, exist_ok=True)
    scheduler = Scheduler(settings.logs / f"{name}-scheduler.log")
    fleets: list[Fleet] = []
    try:
        worker_fleet = Fleet(scheduler.address, settings.logs / f"{name}-workers.log", workers=workers,
                             capacity=settings.capacity, tag="w", links=links_for(workers))  # fmt: skip
        fleets.append(worker_fleet)
        client_fleet = Fleet(scheduler.address, settings.logs / f"{name}-clients.log", clients=clients, tag="c")
        fleets.append(client_fleet)
        for fleet, wanted in ((worker_fleet, workers), (client_fleet, clients)):
            answer = fleet.ask("connect")
            registered = answer["registered_workers"] + answer["registered_clients"]
            if registered != wanted:
                raise RuntimeError(f"{name}: {registered} of {wanted} peers registered ({answer})")
        yield scheduler, worker_fleet, client_fleet
    finally:
        for fleet in fleets:
            fleet.stop()
        scheduler.stop()


def checks(worker_fleet: Fleet, client_fleet: Fleet, submitted: int) -> dict[str, Any]:
    """Nothing lost or duplicated: every task submitted answered once, and sent to a worker once."""
    workers, clients = worker_fleet.ask("report"), client_fleet.ask("report")
    found = {
        "submitted": clients["submitted"],
        "answered": clients["answered"],
        "unanswered": clients["unanswered"],
        "answers_twice": clients["answers_twice"],
        "answers_unknown": clients["answers_unknown"],
        "tasks_sent_to_workers": workers["tasks_received"],
        "tasks_sent_twice": workers["tasks_twice"],
        "tasks_asked_back": workers["tasks_asked_back"],
        "tasks_per_link_message": round(workers["tasks_received"] / max(1, workers["link_messages"]), 2),
        "answers_per_client_message": round(clients["answered"] / max(1, clients["client_messages"]), 2),
        "workers_lost": workers["lost_workers"],
        "protocol_errors": workers["protocol_errors"] + clients["protocol_errors"],
    }
    found["ok"] = (
        found["submitted"] == submitted == found["answered"] == found["tasks_sent_to_workers"]
        and not found["answers_twice"] and not found["answers_unknown"] and not found["tasks_sent_twice"]
        and not found["workers_lost"] and not found["protocol_errors"]
    )  # fmt: skip
    return found


def idle_cpu(scheduler: Scheduler, seconds: float) -> float:
    """The scheduler's CPU over `seconds`, in percent of one core."""
    before = scheduler.cpu_seconds()
    time.sleep(seconds)
    return (scheduler.cpu_seconds() - before) / seconds * 100


def idle_cpu_subscribed(scheduler: Scheduler, seconds: float) -> tuple[float, int]:
    """The same while a monitor (scaler_top, a dashboard) reads the status topic; and the workers the last status
    it read showed (a late subscriber must see the whole cluster)."""
    shown = [0]
    with FeedReader(scheduler.monitor_address, topics=(STATUS_TOPIC,)) as feed:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # subscribed once the first status arrives
            if isinstance(feed.receive(1.0), m.StatusSnapshot):
                break
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                message = feed.receive(0.5)
                if isinstance(message, m.StatusSnapshot):
                    shown[0] = len(message.workers)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            percent = idle_cpu(scheduler, seconds)
        finally:
            stop.set()
            reader.join(5)
    return percent, shown[0]


@contextlib.contextmanager
def window_command(scheduler: Scheduler, window: int = 0) -> Iterator[None]:
    """`SCALE_TASK_WINDOW_COMMAND` (e.g. `py-spy record --pid {pid} --rate 200 -o /tmp/w-{pid}-{window}.svg`): a
    profiler started on the scheduler's pid while a window's tasks run (`window`: which, from 0), and interrupted
    (SIGINT) when they are all answered."""
    command = os.environ.get("SCALE_TASK_WINDOW_COMMAND")
    if not command:
        yield
        return
    profiler = subprocess.Popen(shlex.split(command.format(pid=scheduler.psutil.pid, window=window)))
    time.sleep(1.0)  # attached before the first task
    try:
        yield
    finally:
        profiler.send_signal(signal.SIGINT)
        try:
            profiler.wait(60)
        except subprocess.TimeoutExpired:
            profiler.kill()
            profiler.wait()


def run_tasks(
    scheduler: Scheduler, client_fleet: Fleet, tasks: int, window: int, index: int = 0
) -> tuple[float, float]:
    """(scheduler CPU seconds, wall seconds) while `tasks` no-op tasks go through, `window` unanswered at most
    (`index`: which of a scheduler's windows this is)."""
    already = client_fleet.ask("report")["answered"]
    with window_command(scheduler, index):
        cpu, started = scheduler.cpu_seconds(), time.monotonic()
        with callgrind.counted_window(scheduler.psutil.pid, tasks):
            client_fleet.ask("submit", tasks=tasks, window=window)
            answer = client_fleet.ask("wait", answered=already + tasks, timeout=max(600, tasks / 200))
    if answer["answered"] < already + tasks:
        raise RuntimeError(f"only {answer['answered'] - already} of {tasks} tasks were answered in time")
    return scheduler.cpu_seconds() - cpu, time.monotonic() - started


@dataclass
class Windows:
    """The task windows one scheduler ran: each window's scheduler CPU seconds and wall seconds."""

    tasks: int
    cpu: list[float]
    wall: list[float]

    def per_task_us(self, idle_percent: float = 0.0) -> list[float]:
        """Each window's CPU per task (µs), less `idle_percent` of a core over its wall time."""
        pairs = zip(self.cpu, self.wall, strict=True)
        return [(cpu - idle_percent / 100 * wall) / self.tasks * 1e6 for cpu, wall in pairs]

    def figures(self, idle_percent: float = 0.0) -> dict[str, Any]:
        raw, net = self.per_task_us(), self.per_task_us(idle_percent)
        return {
            "tasks": self.tasks,
            "windows": len(raw),
            "cpu_per_task_us": statistics.median(raw),
            "cpu_per_task_us_windows": raw,
            "net_cpu_per_task_us": statistics.median(net),
            "tasks_per_second": statistics.median(self.tasks / wall for wall in self.wall),
        }


def run_windows(scheduler: Scheduler, client_fleet: Fleet, settings: Settings) -> Windows:
    """`settings.windows` windows of `settings.tasks` tasks each, one after the other."""
    found = Windows(settings.tasks, [], [])
    for index in range(max(1, settings.windows)):
        cpu, wall = run_tasks(scheduler, client_fleet, settings.tasks, WINDOW, index)
        found.cpu.append(cpu)
        found.wall.append(wall)
    return found


#: RSS growth of an idle scheduler over its idle window that says it falls behind its peers' heartbeats (ZeroMQ
#: queues what its main thread has not read yet, without bound): its figures then say what a saturated core costs
FALLING_BEHIND_MB = 100.0


def workers_axis(settings: Settings, sizes: list[int], rows: list[dict[str, Any]] | None = None,
                 on_row: Callable[[], None] = lambda: None) -> list[dict[str, Any]]:  # fmt: skip
    """Idle cost (no subscriber, then one) and CPU per task against the number of workers, one client (or
    `settings.workers_axis_clients`). A scheduler
    whose RSS grows by FALLING_BEHIND_MB while idle is reading heartbeats more slowly than they come (the machine's
    cores are taken): the row says so and the tasks are not run."""
    rows = [] if rows is None else rows
    for workers in sizes:
        clients = settings.workers_axis_clients
        print(f"[workers] {workers:,} workers" + (f", {clients} clients" if clients != 1 else ""), flush=True)
        with cluster(settings, f"workers-{workers}", workers, clients) as (scheduler, worker_fleet, client_fleet):
            # a worker learns the cluster's period at its first heartbeat after the period it was given on
            # registration (scaler/protocol/heartbeat_period.py): the idle window starts once every one has
            time.sleep(SETTLE_SECONDS + worker_fleet.ask("report")["longest_period"])
            before, beats = scheduler.rss_mb(), worker_fleet.ask("report")["heartbeats_sent"]
            idle = idle_cpu(scheduler, settings.idle_seconds)
            rss, after = scheduler.rss_mb(), worker_fleet.ask("report")
            heartbeats = {
                "heartbeat_period_seconds": after["longest_period"],
                "heartbeats_per_second": (after["heartbeats_sent"] - beats) / settings.idle_seconds,
            }
            if rss - before > FALLING_BEHIND_MB:
                print(f"  falling behind: RSS {before:.0f} -> {rss:.0f} MB in {settings.idle_seconds:g} s idle; "
                      f"idle CPU {idle:.0f}%", flush=True)  # fmt: skip
                rows.append({"workers": workers, "idle_cpu_percent": idle, "falling_behind": True,
                             "rss_mb_idle": rss, "rss_mb_growth_idle": rss - before, **heartbeats})  # fmt: skip
                on_row()
                continue
            subscribed, shown = idle_cpu_subscribed(scheduler, settings.idle_seconds)
            ran = run_windows(scheduler, client_fleet, settings)
            row = {
                "workers": workers,
                "clients": clients,
                "idle_cpu_percent": idle,
                "idle_cpu_percent_per_1000_workers": idle / workers * 1000,
                "workers_with_a_link": after["workers_with_a_link"],
                **heartbeats,
                "idle_cpu_percent_subscribed": subscribed,
                "workers_shown_to_late_subscriber": shown,
                "rss_mb_idle": rss,
                **ran.figures(idle),  # net: what the heartbeats cost meanwhile taken out
                "checks": checks(worker_fleet, client_fleet, settings.tasks * len(ran.cpu)),
            }
        print(f"  idle {row['idle_cpu_percent']:.1f}% at {row['heartbeats_per_second']:.0f} heartbeats/s (period "
              f"{row['heartbeat_period_seconds']:g} s), "
              f"{row['idle_cpu_percent_subscribed']:.1f}% with a subscriber "
              f"shown {shown:,} workers); {row['cpu_per_task_us']:.1f} us per task "
              f"({row['net_cpu_per_task_us']:.1f} without the idle cost; windows "
              f"{', '.join(f'{us:.0f}' for us in row['cpu_per_task_us_windows'])}), "
              f"{row['tasks_per_second']:,.0f} tasks/s; "
              f"checks {'ok' if row['checks']['ok'] else row['checks']}", flush=True)  # fmt: skip
        rows.append(row)
        on_row()
    return rows


#: The figures of a row that `over_turns` gives as the median of the turns' (each turn's in `<figure>_turns`).
TURN_FIGURES = ("cpu_per_task_us", "net_cpu_per_task_us", "idle_cpu_percent", "idle_cpu_percent_per_1000_workers",
                "idle_cpu_percent_subscribed", "tasks_per_second", "fairness_min_over_max")  # fmt: skip


def over_turns(turns: list[list[dict[str, Any]]], key: str) -> list[dict[str, Any]]:
    """One row per size (`key`: "workers" or "clients") from the rows of every turn so far: the first turn's row, its
    figures the median of the turns' (each turn's figure in `<figure>_turns`), and its checks ok only if every turn's
    were. A single turn's rows come back as they are."""
    if len(turns) == 1:
        return turns[0]
    merged = []
    for first in turns[0]:
        same = [row for rows in turns for row in rows if row[key] == first[key]]
        row = dict(first)
        for figure in TURN_FIGURES:
            values = [other[figure] for other in same if figure in other]
            if values:
                row[figure] = statistics.median(values)
                row[f"{figure}_turns"] = values
        checks_ok = all(other.get("checks", {}).get("ok", False) for other in same)
        row["checks"] = {**first.get("checks", {}), "ok": checks_ok, "turns": len(same)}
        merged.append(row)
    return merged


def clients_axis(settings: Settings, counts: list[int], workers: int = 100) -> list[dict[str, Any]]:
    """CPU per task against the number of clients (100 workers), the same total load; then fair shares: every client
    submits its part at once, and the answers each had when half of all were in are compared."""
    rows = []
    for clients in counts:
        print(f"[clients] {clients} clients, {workers} workers", flush=True)
        with cluster(settings, f"clients-{clients}", workers, clients) as (scheduler, worker_fleet, client_fleet):
            time.sleep(SETTLE_SECONDS)
            ran = run_windows(scheduler, client_fleet, settings)
            ran_tasks = settings.tasks * len(ran.cpu)
            fair_tasks = max(clients * 500, settings.tasks // 2)
            client_fleet.ask("submit", tasks=fair_tasks, all_at_once=True)
            waited = client_fleet.ask("wait", answered=ran_tasks + fair_tasks, timeout=max(600, fair_tasks / 200),
                                      half_counts=True)  # fmt: skip
            halves = waited["half_counts"] or [0]
            row = {
                "clients": clients,
                "workers": workers,
                **ran.figures(),
                "fairness_tasks": fair_tasks,
                "fairness_min_over_max": min(halves) / max(max(halves), 1),
                "fairness_spread": statistics.pstdev(halves) / max(statistics.mean(halves), 1e-9),
                "checks": checks(worker_fleet, client_fleet, ran_tasks + fair_tasks),
            }
        print(f"  {row['cpu_per_task_us']:.1f} us per task (windows "
              f"{', '.join(f'{us:.0f}' for us in row['cpu_per_task_us_windows'])}), "
              f"{row['tasks_per_second']:,.0f} tasks/s; fair shares: "
              f"the least served client had {row['fairness_min_over_max']:.2f} of the most served's answers; "
              f"checks {'ok' if row['checks']['ok'] else row['checks']}", flush=True)  # fmt: skip
        rows.append(row)
    return rows


def wait_queued(scheduler: Scheduler, count: int, timeout: float) -> None:
    with FeedReader(scheduler.monitor_address, topics=(STATUS_TOPIC,)) as feed:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = feed.receive(1.0)
            if isinstance(message, m.StatusSnapshot) and message.scheduler.queued >= count:
                return
    raise RuntimeError(f"the scheduler did not show {count:,} tasks queued within {timeout:g} s")


#: Tasks a fleet of its own runs before a queue's figures start: what the first tasks make once (modules imported on
#: first use, the first connections' buffers) is not counted as the queue's.
WARM_UP_TASKS = 2000


def warm_up(scheduler: Scheduler, settings: Settings, name: str, workers: int) -> None:
    """WARM_UP_TASKS run by `workers` fake workers and a client of their own, who all leave before the figures
    start."""
    fleet = Fleet(scheduler.address, settings.logs / f"{name}-warm-up.log", workers=workers, clients=1,
                  capacity=settings.capacity, tag="u")  # fmt: skip
    try:
        fleet.ask("connect")
        fleet.ask("submit", tasks=WARM_UP_TASKS)
        fleet.ask("wait", answered=WARM_UP_TASKS, timeout=300)
        fleet.ask("leave")
    finally:
        fleet.stop()
    time.sleep(DRAIN_WAIT_SECONDS)


def queue_axis(settings: Settings, sizes: list[int], workers: int = 100) -> list[dict[str, Any]]:
    """Memory per queued task (no worker connected), then the RSS once they ran and their client left."""
    rows = []
    for queued in sizes:
        print(f"[queue] {queued:,} tasks queued", flush=True)
        with cluster(settings, f"queue-{queued}", 0, 1) as (scheduler, _none, client_fleet):
            time.sleep(2)
            cold = scheduler.rss_mb()
            warm_up(scheduler, settings, f"queue-{queued}", workers)
            start = scheduler.rss_mb()
            client_fleet.ask("submit", tasks=queued, all_at_once=True)
            wait_queued(scheduler, queued, max(600, queued / 1000))
            time.sleep(QUEUED_SETTLE_SECONDS)
            peak = scheduler.rss_mb()
            worker_fleet = Fleet(scheduler.address, settings.logs / f"queue-{queued}-late-workers.log",
                                 workers=workers, capacity=settings.capacity, tag="l")  # fmt: skip
            try:
                worker_fleet.ask("connect")
                began = time.monotonic()
                client_fleet.ask("wait", answered=queued, timeout=max(600, queued / 200))
                ran = time.monotonic() - began
                found = checks(worker_fleet, client_fleet, queued)
                client_fleet.ask("leave")
                time.sleep(DRAIN_WAIT_SECONDS)
                drained = scheduler.rss_mb()
            finally:
                worker_fleet.stop()
            time.sleep(DRAIN_WAIT_SECONDS)
            alone = scheduler.rss_mb()  # as at the start: no worker, and one client (another one) fewer
        row = {
            "queued": queued,
            "rss_mb_cold": cold,
            "growth_kept_cold": (drained - cold) / max(peak - cold, 1e-9),
            "rss_mb_start": start,
            "rss_mb_queued": peak,
            "bytes_per_queued_task": (peak - start) * (1 << 20) / queued,
            "rss_mb_drained": drained,
            "growth_kept": (drained - start) / max(peak - start, 1e-9),
            # the workers that ran the queue gone too: the scheduler as it was at the start, its queue's memory apart
            "rss_mb_peers_gone": alone,
            "growth_kept_peers_gone": (alone - start) / max(peak - start, 1e-9),
            "drain_seconds": ran,
            "checks": found,
        }
        print(f"  {row['bytes_per_queued_task']:.0f} bytes per queued task; RSS {start:.0f} -> {peak:.0f} -> "
              f"{drained:.0f} MB ({row['growth_kept']:.0%} of the growth kept; {alone:.0f} MB, "
              f"{row['growth_kept_peers_gone']:.0%}, once its workers left too); checks "
              f"{'ok' if found['ok'] else found}", flush=True)  # fmt: skip
        rows.append(row)
    return rows


def soak_axis(settings: Settings, rounds: int, queued: int, workers: int = 100) -> dict[str, Any]:
    """Repeated drains on one scheduler: each round a new client queues `queued` tasks at once, they run, it leaves;
    the RSS after each round must not grow."""
    print(f"[soak] {rounds} rounds of {queued:,} tasks", flush=True)
    after: list[float] = []
    peaks: list[float] = []
    where: list[dict[str, float]] = []  # the RSS after each round by mapping: which heap keeps what the rounds leave
    all_ok = True
    with cluster(settings, "soak", workers, 0) as (scheduler, worker_fleet, _none):
        time.sleep(2)
        start = scheduler.rss_mb()
        start_where = scheduler.rss_by_heap_mb()
        for number in range(rounds):
            client_fleet = Fleet(scheduler.address, settings.logs / f"soak-clients-{number}.log", clients=1,
                                 tag=f"s{number}")  # fmt: skip
            try:
                client_fleet.ask("connect")
                client_fleet.ask("submit", tasks=queued, all_at_once=True)
                peak = [scheduler.rss_mb()]
                while client_fleet.ask("wait", answered=queued, timeout=1)["answered"] < queued:
                    peak.append(scheduler.rss_mb())
                found = client_fleet.ask("report")
                all_ok = all_ok and found["answered"] == queued and not found["answers_twice"]
                client_fleet.ask("leave")
            finally:
                client_fleet.stop()
            time.sleep(DRAIN_WAIT_SECONDS)
            peaks.append(max(peak))
            after.append(scheduler.rss_mb())
            where.append(scheduler.rss_by_heap_mb())
            print(f"  round {number + 1}: RSS {max(peak):.0f} MB at most, {after[-1]:.0f} MB after (main heap "
                  f"{where[-1]['main_heap']:.1f}, largest other arena {where[-1]['largest_anonymous']:.1f})",
                  flush=True)  # fmt: skip
        found = worker_fleet.ask("report")
        all_ok = all_ok and not found["tasks_twice"] and found["tasks_received"] == rounds * queued
    growth = after[-1] - after[0]
    return {
        "rounds": rounds,
        "queued_per_round": queued,
        "rss_mb_start": start,
        "rss_mb_peaks": peaks,
        "rss_mb_after_rounds": after,
        "rss_mb_by_heap_start": start_where,
        "rss_mb_by_heap_after_rounds": where,
        "growth_first_to_last_mb": growth,
        "flat": growth <= max(0.05 * (max(peaks) - start), 2.0),
        # whether it still climbs once settled: the least-squares slope of the RSS over the second half of the rounds
        "mb_per_round_second_half": _slope(after[len(after) // 2 :]),
        "checks_ok": all_ok,
    }


def _slope(values: list[float]) -> float:
    """The least-squares slope of `values` against their index (0 with fewer than two)."""
    count = len(values)
    if count < 2:
        return 0.0
    middle = (count - 1) / 2
    mean = sum(values) / count
    return sum((index - middle) * (value - mean) for index, value in enumerate(values)) / sum(
        (index - middle) ** 2 for index in range(count)
    )


def client_axis(settings: Settings, pending_sizes: list[int], map_items: int) -> dict[str, Any]:
    """A real Client: its memory per pending future (no worker), and one map of `map_items` small items (two real
    workers)."""
    import subprocess
    import sys

    from scale.processes import BENCH_DIR, BIN, _end

    found: dict[str, Any] = {"pending": [], "map": None}
    for tasks in pending_sizes:
        print(f"[client] {tasks:,} pending futures", flush=True)
        scheduler = Scheduler(settings.logs / f"client-pending-{tasks}-scheduler.log")
        try:
            command = [sys.executable, "-m", "scale.client_side", "pending", scheduler.address, "--tasks", str(tasks)]
            output = subprocess.run(command, cwd=BENCH_DIR, capture_output=True, text=True, timeout=3600)
            if output.returncode != 0:
                raise RuntimeError(f"the client failed: {output.stderr[-2000:]}")
            row = json.loads(output.stdout.splitlines()[-1])
        finally:
            scheduler.stop()
        print(f"  {row['bytes_per_pending_future']:.0f} bytes per pending future", flush=True)
        found["pending"].append(row)
    if map_items:
        print(f"[client] Client.map of {map_items:,} items, 2 real workers", flush=True)
        scheduler = Scheduler(settings.logs / "client-map-scheduler.log")
        command = [str(BIN / "scaler_cluster"), "-n", "2", scheduler.address]
        quiet = subprocess.DEVNULL
        workers = subprocess.Popen(command, stdout=quiet, stderr=quiet, start_new_session=True)
        try:
            command = [sys.executable, "-m", "scale.client_side", "map", scheduler.address, "--items", str(map_items)]
            output = subprocess.run(command, cwd=BENCH_DIR, capture_output=True, text=True, timeout=7200)
            if output.returncode != 0:
                raise RuntimeError(f"the client failed: {output.stderr[-2000:]}")
            found["map"] = json.loads(output.stdout.splitlines()[-1])
        finally:
            _end(workers)
            scheduler.stop()
        row = found["map"]
        print(f"  {row['seconds']:.0f} s; client RSS {row['rss_mb_before']:.0f} -> {row['rss_mb_peak']:.0f} MB at "
              f"most; the result list itself {row['result_list_mb']:.0f} MB; "
              f"{row['bytes_per_item_beyond_results']:.1f} bytes per item beyond it", flush=True)  # fmt: skip
    return found
