"""The `scaler_top` screen as text: a pure function of the latest status snapshot, the latest scaling
decisions and the sort order (no terminal, no clock), so every line of it is tested without a terminal.

The layout is the seeds' (a top-like screen): the scheduler's cpu/rss, the task states, the messages sent and
received by type, then "Total N worker(s)" and a worker table sortable by a one-key shortcut (the sorted
column is marked with brackets; the same key again reverses), then the waiting tasks and why they wait, clients,
functions, jobs, actors and scaling decisions; where objects live and move (the object storage server's bytes, its
host caches, the copies of large objects, the transfers under way) once any moved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scaler.object_storage.traffic import summed
from scaler.protocol import messages as m
from scaler.protocol.message_extras import describe_waits
from scaler.protocol.storage_messages import HostTraffic, StorageTraffic

Value = Callable[[m.WorkerSummary], float | str]


@dataclass(frozen=True)
class Column:
    key: str  #: its sort shortcut
    title: str
    width: int
    value: Value  #: what it sorts by
    text: Callable[[m.WorkerSummary], str]


def worker_label(worker: m.WorkerSummary) -> str:
    """`pid|host|abc+`: the seeds' worker column (the last part is the start of the worker's own id)."""
    own = worker.worker_id.decode(errors="replace").rsplit("|", 1)[-1]
    return f"{worker.pid}|{worker.hostname[:12]}|{own[:3]}+"


def size(value: float) -> str:
    for unit, scale in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}b"


def lag(seconds: float) -> str:
    return f"{seconds * 1000:.1f}ms" if seconds < 1 else f"{seconds:.1f}s"


def _processors_cpu(worker: m.WorkerSummary) -> float:
    return sum(processor.cpu_percent for processor in worker.status.processors)


def memory_share(worker: m.WorkerSummary) -> float:
    """The worker's charged memory (its agent's and processors' PSS) as a share of the limit it runs under."""
    limit = worker.status.memory_limit_bytes
    return worker.status.memory_bytes / limit if limit else 0.0


def _limit(worker: m.WorkerSummary) -> str:
    limit = worker.status.memory_limit_bytes
    if not limit:
        return "-"
    return size(limit) + ("" if worker.status.memory_limit_source == "machine" else "*")


def _free(worker: m.WorkerSummary) -> int:
    return max(0, worker.capacity - worker.assigned)


COLUMNS: tuple[Column, ...] = (
    Column("n", "worker", 30, worker_label, worker_label),
    Column("C", "agt_cpu", 8, lambda w: w.cpu_percent, lambda w: f"{w.cpu_percent:.1f}%"),
    Column("M", "agt_rss", 8, lambda w: w.rss_bytes, lambda w: size(w.rss_bytes)),
    Column("c", "cpu", 7, _processors_cpu, lambda w: f"{_processors_cpu(w):.1f}%"),
    Column("m", "mem", 8, lambda w: w.status.memory_bytes, lambda w: size(w.status.memory_bytes)),
    Column("L", "limit", 8, lambda w: w.status.memory_limit_bytes, _limit),
    Column("u", "mem%", 6, memory_share, lambda w: f"{memory_share(w) * 100:.0f}%"),
    Column("f", "free", 5, _free, lambda w: str(_free(w))),
    Column("w", "sent", 5, lambda w: w.assigned, lambda w: str(w.assigned)),
    Column("d", "queued", 6, lambda w: w.status.queued, lambda w: str(w.status.queued)),
    Column("l", "lag", 8, lambda w: w.lag_seconds, lambda w: lag(w.lag_seconds)),
    Column("g", "manager", 14, lambda w: w.manager_id, lambda w: w.manager_id or "-"),
)
SORT_KEYS = {column.key: column for column in COLUMNS}
SHORTCUTS = "Shortcuts: " + " ".join(f"{column.title}[{column.key}]" for column in COLUMNS) + "  quit[q]"


@dataclass(frozen=True)
class Sorting:
    key: str = "n"
    descending: bool = False

    def press(self, key: str) -> Sorting:
        """A shortcut: sort by its column; the same key again reverses the order."""
        if key not in SORT_KEYS:
            return self
        if key == self.key:
            return Sorting(key, not self.descending)
        return Sorting(key, descending=key not in ("n", "g"))  # numbers: biggest first


#: Said while no status came: a status that never comes is most often a wrong address.
WHERE_THE_MONITOR_IS = (
    "(the monitor address is the one the scheduler logs as 'monitor address is ...': by default its port + 2)"
)


def render(
    snapshot: m.StatusSnapshot | None,
    decisions: Sequence[m.ScalingDecision],
    sorting: Sorting,
    address: str,
    silent_seconds: float | None = None,
) -> list[str]:
    """The screen's lines. `silent_seconds`: how long no status came (None: it is fresh)."""
    if snapshot is None:
        return [f"scaler_top: waiting for the scheduler's status at {address} ...", WHERE_THE_MONITOR_IS, "", SHORTCUTS]
    lines = _header(snapshot)
    if silent_seconds is not None:
        lines.insert(0, f"!! no status from {address} for {silent_seconds:.0f} s: the scheduler may be gone")
    lines += ["-" * 97, SHORTCUTS, "", f"Total {len(snapshot.workers)} worker(s)"]
    lines += _worker_table(snapshot.workers, sorting)
    if any(worker.status.memory_limit_source.startswith("cgroup") for worker in snapshot.workers):
        lines.append("mem: the worker's PSS (agent and processors); limit*: its cgroup's memory limit")
    lines += waiting_lines(snapshot.pending)
    lines += storage_lines(snapshot.storage)
    lines += placement_lines(snapshot.scheduler)
    lines += _clients_and_functions(snapshot)
    lines += spend_lines(snapshot.managers)
    lines += warm_lines(snapshot.managers)
    lines += queue_lines(snapshot.managers)
    if decisions:
        lines += ["", "scaling decisions (latest last)"]
        lines += [
            f"  {decision.manager_id}: {decision.from_workers} -> {decision.to_workers} workers: {decision.reason}"
            for decision in decisions
        ]
    return lines


#: Waiting groups (capability sets) shown at most; the rest are counted.
WAITING_GROUPS_SHOWN = 5


def waiting_lines(pending: Sequence[m.PendingGroup]) -> list[str]:
    """Queued tasks by capability set, the oldest one's wait, and why they wait (no worker has the capabilities,
    a client's quota, every worker busy, ...): what the dashboard's "waiting tasks" shows."""
    waiting = sorted((group for group in pending if group.count), key=lambda group: -group.count)
    if not waiting:
        return []
    lines = ["", f"{'waiting tasks':>30} {'queued':>7} {'running':>7} {'oldest':>8}  why"]
    for group in waiting[:WAITING_GROUPS_SHOWN]:
        names = ",".join(name if value < 0 else f"{name}={value}" for name, value in group.capabilities) or "-"
        lines.append(
            f"{names[:30]:>30} {group.count:>7,} {group.running:>7,} {age(group.oldest_queued_seconds):>8}  "
            f"{group.reason or '-'}"
        )
    if len(waiting) > WAITING_GROUPS_SHOWN:
        lines.append(f"{'':>30} ... and {len(waiting) - WAITING_GROUPS_SHOWN} more capability set(s)")
    return lines


#: Rows of each table of where objects live and move (hosts, objects, transfers); the dashboard shows all the feed has.
STORAGE_ROWS = 6


def storage_lines(storage: StorageTraffic) -> list[str]:
    """Where objects live and move, once any moved: what the object storage server sent (to host caches apart),
    each host's cache (bytes in from the storage and from other hosts, out to other hosts, what it holds), the large
    objects with their copies sent out of the storage and held on hosts, and the transfers under way with their rate:
    what a slow broadcast is read from (docs/guide/monitoring_and_security.md)."""
    if not (storage.bytes_sent or storage.bytes_received or storage.host_count):
        return []
    summary = (
        f"object storage sent {size(storage.bytes_sent)} ({size(storage.bytes_sent_to_caches)} to host caches), "
        f"received {size(storage.bytes_received)}; {storage.host_count} host cache(s); {storage.transfer_count} "
        f"transfer(s) under way, {size(storage.transfer_bytes_left)} to go"
    )
    return ["", summary, *_host_lines(storage), *_object_lines(storage), *_transfer_lines(storage)]


def placement_lines(stats: m.SchedulerStats) -> list[str]:
    """Where tasks naming large inputs went, once any did: to a host holding one of their inputs (near), or elsewhere
    because every holding host was busy, at once or once their bounded wait for one ended (away): many "away" is why
    such tasks fetch their inputs again."""
    if not (stats.near_data or stats.away_from_data):
        return []
    return [
        f"tasks with large inputs: {stats.near_data} placed near their data, {stats.away_from_data} away "
        "(the hosts holding their inputs busy)"
    ]


def _host_lines(storage: StorageTraffic) -> list[str]:
    if not storage.hosts:
        return []
    header = (
        f"{'host':>30} {'from storage':>12} {'from hosts':>10} {'to hosts':>9} {'uploaded':>9} {'cache holds':>15} "
        f"{'fetching':>8}"
    )
    shown = storage.hosts[:STORAGE_ROWS]
    lines = [header, *(_host_line(row.host, row) for row in shown)]
    more = storage.host_count - len(shown)
    if more > 0:
        rest = summed([*storage.hosts[STORAGE_ROWS:], storage.other_hosts])
        lines.append(_host_line(f"... {more} more host(s)", rest))
    return lines


def _host_line(name: str, row: HostTraffic) -> str:
    holds = f"{size(row.held_bytes)} ({row.held_objects})"
    return (
        f"{name[:30]:>30} {size(row.bytes_from_storage):>12} {size(row.bytes_from_hosts):>10} "
        f"{size(row.bytes_to_hosts):>9} {size(row.bytes_uploaded):>9} {holds:>15} {row.transfers:>8}"
    )


def _object_lines(storage: StorageTraffic) -> list[str]:
    if not storage.objects:
        return []
    lines = [f"{'large object':>30} {'size':>8} {'copies sent':>11} {'on hosts':>8} {'fetching':>8}  name"]
    for copies in storage.objects[:STORAGE_ROWS]:
        lines.append(
            f"{copies.object_id.hex()[:16]:>30} {size(copies.total_bytes):>8} {copies.copies_sent:>11} "
            f"{copies.hosts:>8} {copies.fetching:>8}  {copies.name}"
        )
    return lines


def _transfer_lines(storage: StorageTraffic) -> list[str]:
    if not storage.transfers:
        return []
    shown = storage.transfers[:STORAGE_ROWS]
    lines = [f"{'transfer':>30} {'to':>14} {'from':>14} {'done':>15} {'rate':>9}"]
    for each in shown:
        rate = each.done_bytes / each.seconds if each.seconds > 0 else 0.0
        lines.append(
            f"{each.object_id.hex()[:16]:>30} {each.to[:14]:>14} {(each.source or 'storage')[:14]:>14} "
            f"{size(each.done_bytes) + '/' + size(each.total_bytes):>15} {size(rate) + '/s':>9}"
        )
    if storage.transfer_count > len(shown):
        lines.append(f"{'':>30} ... and {storage.transfer_count - len(shown)} more")
    return lines


def spend_lines(managers: Sequence[m.ManagerSummary]) -> list[str]:
    """What the managers' units cost now, when any manager declared a worker cost."""
    priced = [manager for manager in managers if manager.worker_cost_per_hour > 0]
    if not priced:
        return []
    total = sum(manager.spend_per_hour for manager in priced)
    parts = ", ".join(
        f"{manager.manager_id} {manager.units} x {manager.worker_cost_per_hour:g} = {manager.spend_per_hour:.2f}"
        for manager in priced
    )
    return ["", f"spend now {total:.2f}/hour ({parts})"]


def warm_lines(managers: Sequence[m.ManagerSummary]) -> list[str]:
    """Each manager's warm capacity (min_workers, buffer_workers) and what it costs idle, when any manager has one."""
    warm = [manager for manager in managers if manager.min_workers or manager.buffer_workers]
    if not warm:
        return []
    parts = ", ".join(
        f"{manager.manager_id} min {manager.min_workers} buffer {manager.buffer_workers}"
        + (f" = {manager.warm_spend_per_hour:.2f}/hour idle" if manager.worker_cost_per_hour > 0 else "")
        for manager in warm
    )
    return [f"warm capacity: {parts}"]


def queue_lines(managers: Sequence[m.ManagerSummary]) -> list[str]:
    """Each manager whose units wait in their provider's queue (Slurm's pending reasons, pods unschedulable), or that
    holds launches back, and why."""
    lines = []
    for manager in managers:
        if manager.waits:
            lines.append(f"{manager.manager_id}: {describe_waits(manager.waits)}")
        if manager.held:
            lines.append(f"{manager.manager_id}: launches held back: {manager.held}")
    return ["", "units waiting", *(f"  {line}" for line in lines)] if lines else []


def _header(snapshot: m.StatusSnapshot) -> list[str]:
    stats = snapshot.scheduler
    scheduler = [f"{'cpu':>9} {stats.cpu_percent:5.1f}%", f"{'rss':>9} {size(stats.rss_bytes):>6}"]
    states = [
        ("unassigned", stats.queued), ("running", stats.running), ("success", stats.succeeded),
        ("failed", stats.failed), ("canceled", stats.canceled), ("worker_died", stats.worker_died),
        ("not_found", stats.not_found), ("objects", stats.object_count),
    ]  # fmt: skip
    tasks = [f"{name:>12} {count:>7,}" for name, count in states]
    counts = sorted(snapshot.message_counts, key=lambda count: -(count.sent + count.received))
    sent = [f"{c.name:>18} {c.sent:>7,}" for c in counts if c.sent]
    received = [f"{c.name:>18} {c.received:>7,}" for c in counts if c.received]
    columns = [scheduler, tasks, sent, received]
    widths = [16, 20, 26, 26]
    titles = ["scheduler", "task_manager", "scheduler_sent", "scheduler_received"]
    lines = [" | ".join(title.center(width) for title, width in zip(titles, widths, strict=True))]
    for row in range(max(len(column) for column in columns)):
        cells = [column[row] if row < len(column) else "" for column in columns]
        lines.append(" | ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True)).rstrip())
    return lines


def _worker_table(workers: Sequence[m.WorkerSummary], sorting: Sorting) -> list[str]:
    column = SORT_KEYS[sorting.key]
    ordered = sorted(workers, key=lambda worker: (column.value(worker), worker.worker_id), reverse=sorting.descending)
    header = " ".join(
        (f"[{c.title}]" if c.key == sorting.key else c.title).rjust(c.width) for c in COLUMNS
    )  # fmt: skip
    rows = [" ".join(c.text(worker).rjust(c.width) for c in COLUMNS) for worker in ordered]
    return [header, *rows]


def client_state(client: m.ClientSummary) -> str:
    """ "connected", or "away 3m of 30m": how long it has been away (asleep, cut off, moved) and its resume window,
    after which its work is cancelled (docs/guide/bursting.md)."""
    if client.away_seconds <= 0:
        return "connected"
    return f"away {_duration(client.away_seconds)} of {_duration(client.resume_seconds)}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _clients_and_functions(snapshot: m.StatusSnapshot) -> list[str]:
    lines: list[str] = []
    if snapshot.clients:
        lines += ["", f"{'client':>30} {'live':>7} {'success':>9} {'failed':>7} {'canceled':>9}  {'state':<20}"]
        for client in snapshot.clients:
            name = client.name or client.client_id.decode(errors="replace")[-12:]
            counts = client.counts
            lines.append(
                f"{name[:30]:>30} {counts.live:>7,} {counts.succeeded:>9,} {counts.failed:>7,} {counts.canceled:>9,}  "
                f"{client_state(client)}"
            )
    if snapshot.functions:
        lines += ["", f"{'function':>30} {'live':>7} {'success':>9} {'failed':>7}"]
        for function in sorted(snapshot.functions, key=lambda f: -(f.counts.live + f.counts.succeeded))[:10]:
            counts = function.counts
            lines.append(f"{function.name[:30]:>30} {counts.live:>7,} {counts.succeeded:>9,} {counts.failed:>7,}")
    if snapshot.jobs:
        lines += ["", f"{'job':>30} {'state':>10} {'done':>15} {'failed':>7} {'owner':>30} {'key':>10} {'age':>8}"]
        for job in snapshot.jobs[:10]:
            progress = f"{job.done:,}/{job.total:,}"
            owner = f"{job.submitter[:18]} ({'connected' if job.submitter_connected else 'gone'})"
            lines.append(
                f"{job.name[:30]:>30} {job.state:>10} {progress:>15} {job.failed:>7,} {owner:>30} "
                f"{job.owner_key or '-':>10} {age(job.age_seconds):>8}"
            )
    if snapshot.actors:
        lines += ["", f"{'actor':>30} {'state':>9} {'worker':>14} {'restarts':>8} {'calls':>7} {'done':>9} {'age':>8}"]
        for actor in snapshot.actors[:10]:
            name = actor.name or f"{actor.class_name} {actor.actor_id.hex()[:6]}"
            worker = actor.worker_id.decode(errors="replace")[-14:] or "-"
            lines.append(
                f"{name[:30]:>30} {actor.state:>9} {worker:>14} {actor.restarts:>8} {actor.calls:>7,} "
                f"{actor.calls_done:>9,} {age(actor.age_seconds):>8}"
            )
        if len(snapshot.actors) > 10:
            lines.append(f"{'':>30} ... and {len(snapshot.actors) - 10} more actor(s)")
    return lines


def age(seconds: float) -> str:
    """A duration in the largest unit that keeps it short: 42s, 7m05s, 3h12m."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
