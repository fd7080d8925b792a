"""What the scheduler still holds after a queue drained and its client left, in process: the real shell's inbound
handler with its sockets replaced (`scheduler_cost.py`'s driver), one client queueing `--tasks` at once, two workers
running them, the client leaving, ten seconds of ticks (each second the shell's `MemoryReturn`, as its stats
routine calls it: a full collection and `malloc_trim` once a big queue drained); then the RSS, CPython's small-object
allocator (arenas allocated against blocks in use: what fragmentation holds) and, with `--trace`, the live objects
allocated during the rounds grouped by where they were made.

    python benchmarks/drain_memory.py [--tasks 100000] [--rounds 1] [--trace] [--stories 10000] [--no-ran]
    PYTHONPATH=/path/to/another/checkout python benchmarks/drain_memory.py   # the same for another version

`--rounds N`: N such drains on one scheduler, each with a client of its own (the harness's soak, without sockets).
The workers' results carry run stamps as a real processor's do (`--no-ran`: none, as the harness's fake workers send).
Not a test: the in-process figures of docs/guide/scale.md, "Why it stays small".
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
import tempfile
import tracemalloc

from scheduler_cost import BODY, MIDDLE_COLLECTION_YOUNG, PYTHON, YOUNG_COLLECTION_ALLOCATIONS, Driver

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.events import Tick
from scaler.scheduler.core.story_book import DEFAULT_RETENTION_SECONDS, StoryBook
from scaler.scheduler.heap import MemoryReturn

BATCH = 100  #: tasks per frame, as the harness's fake client sends
TICK = 0.25
PER_TICK = 1000
_PROCESSOR = m.ProcessorStatus(1234, 0.0, 60 << 20, "idle", 60 << 20)
WORKER_HEARTBEAT = m.Heartbeat(0.5, 30 << 20, m.WorkerStatus(0, 0, 0, 16 << 30, (_PROCESSOR,), 90 << 20, 8 << 30, "m"))


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def arenas() -> dict[str, int]:
    """The small-object allocator's arenas (1 MiB each here) and the bytes of blocks in use in them."""
    with tempfile.TemporaryFile("w+") as captured:  # it writes to the C stderr
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        text = captured.read()
    found: dict[str, int] = {}
    for name, pattern in (("arenas", r"# arenas allocated current\s*=\s*([\d,]+)"),
                          ("arenas_highwater", r"# arenas highwater mark\s*=\s*([\d,]+)"),
                          ("in_use_bytes", r"# bytes in allocated blocks\s*=\s*([\d,]+)"),
                          ("free_bytes", r"# bytes in available blocks\s*=\s*([\d,]+)"),
                          ("arena_bytes", r"(\d[\d,]*) arenas \* (\d+) bytes/arena")):  # fmt: skip
        match = re.search(pattern, text)
        if match:
            found[name] = int(match.group(1).replace(",", ""))
            if name == "arena_bytes":
                found["arena_size"] = int(match.group(2))
    return found


class Probe:
    def __init__(self, stories: int, ran: bool) -> None:
        self.driver = Driver()
        core = self.driver.server._core
        core.tasks.stories = StoryBook(stories, DEFAULT_RETENTION_SECONDS, "probe")  # as `--story-retention-tasks`
        self.ran = ran
        self.serial = 0
        self.ticks = 0
        self.memory_return = MemoryReturn()
        self.client: PeerID | None = None
        self.answers = 0

    def tick(self) -> None:
        """A quarter second passes; every two seconds the client and the workers heartbeat (as the harness's do)."""
        driver = self.driver
        driver.now += TICK
        driver.server._feed([Tick(driver.now, driver.now + 1.7e9)])
        self.ticks += 1
        if self.ticks % 4 == 0:  # the shell's stats routine, every second: memory given back after a big drain
            self.memory_return.after(len(driver.server._core.tasks))
        if self.ticks % 8 == 0:
            if self.client is not None:
                driver.feed(self.client, [m.Heartbeat(answers_received=self.answers)])
            for worker in driver.workers:
                driver.feed(worker, [WORKER_HEARTBEAT])
        driver.route()

    def round(self, tasks: int) -> None:
        """One client queues `tasks` at once; the workers run them; the client leaves; ten seconds of ticks. A tick
        every `PER_TICK` tasks queued or answered (about the harness's pace)."""
        driver, table = self.driver, self.driver.server._core.tasks
        self.serial += 1
        client = self.client = driver.client = PeerID(b"Client|%032x" % self.serial)
        driver.feed(client, [m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "bench", m.ClientInfo())])
        prefix = self.serial.to_bytes(8, "big")
        for first in range(0, tasks, BATCH):
            frames = [
                codec.encode(m.Task(TaskID(prefix + number.to_bytes(8, "big")), ClientID(client), BODY, "inc"))
                for number in range(first, min(tasks, first + BATCH))
            ]
            driver.feed_frames(client, [b"".join(frames)])
            driver.route()
            if first % PER_TICK == 0:
                self.tick()
        self.peak_rss = rss_mb()
        ended_before = table.succeeded + table.failed + table.canceled
        self.answers = 0
        next_tick = PER_TICK
        while self.answers < tasks:
            moved = False
            for peer, held in driver.held.items():
                if not held:
                    continue
                moved = True
                given, held[:] = held[:], []
                worker = driver.workers[int(peer[-1:], 16) % 2]
                results = []
                for frame in given:
                    for part in codec.split(frame):
                        task = codec.decode(part)
                        if type(task) is not m.Task:
                            continue
                        stamp = driver.now + 1.7e9
                        ran = m.RunStamps(stamp, stamp + 0.0001, 3583, stamp - 0.0001) if self.ran else None
                        results.append(codec.encode(m.TaskResult(
                            task.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"\x80\x05K\x01.", "",
                            m.Profile(), worker, ran)))  # fmt: skip
                driver.feed_frames(peer, results)
                driver.route()
            self.answers = table.succeeded + table.failed + table.canceled - ended_before
            if not moved or self.answers >= next_tick:
                next_tick += PER_TICK
                self.tick()
        if table.succeeded - (ended_before - table.failed - table.canceled) < 0 or table.failed or table.canceled:
            raise RuntimeError(f"tasks failed or were canceled: {table.failed} failed, {table.canceled} canceled")
        driver.feed(client, [m.ClientDisconnect()])
        self.client = None
        driver.route()
        for _ in range(40):
            self.tick()


def top(snapshot: tracemalloc.Snapshot, before: tracemalloc.Snapshot, count: int) -> list[str]:
    lines = []
    for stat in snapshot.compare_to(before, "traceback")[:count]:
        if stat.size_diff <= 0:
            continue
        frames = [f"{frame.filename.rsplit('/scaler/', 1)[-1]}:{frame.lineno}" for frame in stat.traceback][-4:]
        lines.append(f"{stat.size_diff / 1024:9.0f} KiB {stat.count_diff:8d} objects  {' <- '.join(reversed(frames))}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--stories", type=int, default=10_000, help="--story-retention-tasks (0: no stories)")
    parser.add_argument("--no-ran", action="store_true", help="results without run stamps (as the harness's)")
    parser.add_argument("--trace", action="store_true", help="tracemalloc: what the rounds left allocated")
    parser.add_argument("--top", type=int, default=25)
    arguments = parser.parse_args()
    gc.set_threshold(YOUNG_COLLECTION_ALLOCATIONS, MIDDLE_COLLECTION_YOUNG, gc.get_threshold()[2])
    probe = Probe(arguments.stories, not arguments.no_ran)
    probe.round(2000)  # warm: every code path and the tables of a small queue
    gc.collect()
    if arguments.trace:
        tracemalloc.start(8)
    before = tracemalloc.take_snapshot() if arguments.trace else None
    start, start_arenas = rss_mb(), arenas()
    print(f"start: RSS {start:.1f} MB, {start_arenas}")
    for number in range(arguments.rounds):
        probe.round(arguments.tasks)
        found = arenas()
        print(
            f"round {number + 1}: RSS {start:.1f} -> {probe.peak_rss:.1f} (queued) -> {rss_mb():.1f} MB (drained: "
            f"{(rss_mb() - start) / (probe.peak_rss - start):.0%} of the growth kept); {found}",
            flush=True,
        )
    found = arenas()
    if found.get("arena_size"):
        size = found["arena_size"]
        held = found["arenas"] * size
        print(f"arenas {found['arenas']} ({held / (1 << 20):.1f} MiB) hold {found['in_use_bytes'] / (1 << 20):.1f} MiB "
              f"in use: {found['in_use_bytes'] / held:.0%}")  # fmt: skip
    if before is not None:
        snapshot = tracemalloc.take_snapshot()
        kept = sum(stat.size_diff for stat in snapshot.compare_to(before, "filename"))
        print(f"traced: {kept / (1 << 20):.2f} MiB more than before the rounds; by traceback:")
        print("\n".join(top(snapshot, before, arguments.top)))


if __name__ == "__main__":
    main()
