"""The scheduler's main thread per tiny task, without sockets: W1's frames through the real shell's inbound handler
(`SchedulerServer._on_frames`: decode, the core, the effects, encode) and the outbox's flush, timed with the CPU clock.

    python benchmarks/scheduler_cost.py [--tasks 20000] [--rounds 5] [--batch 64] [--spaced] [--queued N]
    PYTHONPATH=/path/to/another/checkout python benchmarks/scheduler_cost.py   # the same for another version
    python benchmarks/scheduler_ab.py     # this tree against another commit, alternated, in instructions per task

One client sends tasks `--batch` to a frame (as a client's submit loop does), two workers (capacity 8, as a worker
with one processor announces while busy) answer each task they are given with a result shaped like a real one (an
inline value, run stamps, the worker's id), a burst of frames at a time; every `Send` the core makes is encoded as
the shell does. Each worker has one processor, whose link takes its tasks and brings their results (its hello also
says the worker lends it, so that a tree from before the one route runs the same shape). `--spaced`: U1's
shape (tasks of 2 ms: each result reaches the scheduler alone, a step of its own; with `--batch 1 --queued 5000`, as
its client submits). What it leaves out:
ZeroMQ (each frame about 3-4 us of the socket's own CPU, most in its I/O thread), the event loop and CURVE checks
(no keys here). The garbage collector runs with the scheduler process's thresholds (`YOUNG_COLLECTION_ALLOCATIONS`,
`MIDDLE_COLLECTION_YOUNG`).
`route_cost.py` measures the real processes; this is its scheduler's Python part, with far less noise, for A/B of the
scheduler's code. Not a test.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import gc
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import zmq

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.scheduler_core import CoreSettings, SchedulerCore
from scaler.scheduler.server import SchedulerServer

try:  # the collector's threshold the scheduler process sets (an older tree's process left the interpreter's)
    from scaler.scheduler.process import YOUNG_COLLECTION_ALLOCATIONS
except ImportError:
    YOUNG_COLLECTION_ALLOCATIONS = gc.get_threshold()[0]
try:  # and its middle generation's (an older tree's: the interpreter's)
    from scaler.scheduler.process import MIDDLE_COLLECTION_YOUNG
except ImportError:
    MIDDLE_COLLECTION_YOUNG = gc.get_threshold()[1]

PYTHON = "{}.{}".format(*__import__("sys").version_info[:2])
CAPACITY = 8
BODY = bytes(range(256))[:136]  # a TaskBody's size for inc(i) with its function already in storage


class Sockets:
    security = None


class Router:
    """What the shell asks of its router socket here: whether a burst of reads is under way."""

    in_burst = False


class Outbox:
    """What the shell's outbox is given: each frame kept per peer until the burst's end."""

    def __init__(self) -> None:
        self.pending: dict[bytes, list[bytes]] = {}
        self.frames_sent = 0

    def send(self, peer: bytes, frame: bytes, may_wait: bool = False) -> None:
        """`may_wait` (an answer the real outbox may hold up to 10 ms for the client's next ones): taken at once here,
        as the real outbox's release would have it sent."""
        self.pending.setdefault(peer, []).append(frame)

    def flush_unless_held(self) -> None:
        pass

    def take(self) -> dict[bytes, list[bytes]]:
        pending, self.pending = self.pending, {}
        for frames in pending.values():
            self.frames_sent += len(frames)
        return pending


class Driver:
    def __init__(self) -> None:
        core = SchedulerCore(CoreSettings("tcp://s:1", "tcp://s:2", PYTHON))
        self.server = SchedulerServer(core, "tcp://s:1", "tcp://s:3", "tcp://s:2", Sockets())  # type: ignore[arg-type]
        self.outbox = Outbox()
        self.server._outbox = self.outbox  # type: ignore[assignment]
        self.server._now = self._now  # type: ignore[method-assign]
        self.router = Router()
        self.server._router = self.router  # type: ignore[assignment]
        self.now = 1.0
        self.client = PeerID(b"Client|1290487433ec4611aa2c1628629c4bc4")
        self.workers = [PeerID(b"Worker|FIX|%032x" % number) for number in range(2)]
        self.held: dict[bytes, list[m.Task]] = {}
        self.answered = 0
        self.feed(self.client, [m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "bench", m.ClientInfo())])
        for number, worker in enumerate(self.workers):
            info = m.WorkerInfo((), CAPACITY, "", "FIX", lends_processors=True)
            self.feed(worker, [m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "bench", info)])
            link = PeerID(b"Processor|%032x" % number)
            try:  # it stages tiny tasks, as a forked processor says (a tree from before the one route: a lent one)
                processor = m.ProcessorInfo(b"processor-0", worker, lent=True, max_staged_tasks=64)
            except TypeError:
                processor = m.ProcessorInfo(b"processor-0", worker, lent=True)
            self.feed(link, [m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "bench", processor)])
            self.held[link] = []
        self.outbox.take()

    def _now(self) -> float:
        return self.now

    def feed(self, peer: bytes, messages: list[Any]) -> None:
        frames = [zmq.Frame(peer)] + [zmq.Frame(codec.encode(message)) for message in messages]
        self.server._on_frames(frames)

    def feed_frames(self, peer: bytes, frames: list[bytes]) -> None:
        """One burst of the router's reads: this peer's frames, as one multipart message."""
        self.router.in_burst = True
        self.server._on_frames([zmq.Frame(peer)] + [zmq.Frame(frame) for frame in frames])
        self.router.in_burst = False
        self.server._burst_end()

    def route(self) -> None:
        for peer, frames in self.outbox.take().items():
            if peer in self.held:
                self.held[peer].extend(frames)  # type: ignore[arg-type]
            elif peer == self.client:
                self.answered += len(frames)


def task_frames(client: PeerID, first: int, count: int) -> list[bytes]:
    prefix = b"K\x8eu\xa3$\xdb\x90A"
    return [
        codec.encode(m.Task(TaskID(prefix + number.to_bytes(8, "big")), ClientID(client), BODY, "inc"))
        for number in range(first, first + count)
    ]


def _is_task(frame: bytes) -> bool:
    """A link is sent tasks, and now and then something else (its processor's answers to those are left out)."""
    return isinstance(codec.decode(frame), m.Task)


def result_frame(worker: bytes, task_frame: bytes, stamp: float) -> bytes:
    task = codec.decode(task_frame)
    assert isinstance(task, m.Task)
    ran = m.RunStamps(stamp, stamp + 0.0001, 3583, stamp - 0.0001)
    return codec.encode(
        m.TaskResult(task.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"\x80\x05K\x01.", "", m.Profile(),
                     worker, ran)
    )  # fmt: skip


#: A timed part called through C (ctypes' `ffi_call`): under `valgrind --tool=callgrind --collect-atstart=no
#: --toggle-collect=ffi_call` only the timed parts are counted (`--collect`; scheduler_ab.py runs it so).
_THROUGH_C = ctypes.CFUNCTYPE(None, ctypes.py_object)


def _call_through_c(part: Callable[[], None]) -> None:
    _THROUGH_C(lambda _: part())(None)


def one_round(tasks: int, batch: int, spaced: bool = False, queued: int = 0, collect: bool = False) -> float:
    """CPU seconds per task of the scheduler's part (results are encoded outside the timed part). `spaced`: each
    result is a burst of its own (U1's tasks of 2 ms: a result at a time reaches the scheduler). `queued`: this many
    tasks are submitted first (a deep queue, as a client that submits faster than the tasks run leaves). `collect`:
    each timed part is called through C, for callgrind to count it alone."""
    driver = Driver()
    submitted = 0
    spent = 0.0
    call: Callable[[Callable[[], None]], None] = _call_through_c if collect else (lambda part: part())

    def feed(peer: bytes, frames: list[bytes]) -> None:
        """The timed part: frames read from a peer, and what the core says sent."""
        driver.feed_frames(peer, frames)
        driver.route()

    def submit(count: int) -> None:
        """The client's next `count` tasks, fed to the scheduler (timed)."""
        nonlocal submitted, spent
        frames = task_frames(driver.client, submitted, count)
        submitted += count
        started = time.process_time()
        call(functools.partial(feed, driver.client, frames))
        spent += time.process_time() - started

    gc.collect()
    while driver.answered < tasks:
        while submitted < min(queued, tasks):
            submit(min(batch, queued - submitted))
        if submitted < tasks:
            submit(min(batch, tasks - submitted))
        for peer, held in driver.held.items():
            if not held:
                continue
            given, held[:] = held[:], []
            worker = driver.workers[int(peer[-1:], 16) % 2]
            # each task of each frame (a frame may hold several messages), not the echoes naming the results read
            given = [part for frame in given for part in codec.split(frame) if _is_task(part)]
            results = [result_frame(worker, frame, driver.now) for frame in given]
            driver.now += 0.0005
            for burst in ([result] for result in results) if spaced else [results]:
                started = time.process_time()
                call(functools.partial(feed, peer, burst))
                spent += time.process_time() - started
    return spent / tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="tasks per frame from the client")
    parser.add_argument("--spaced", action="store_true", help="each result a burst of its own (U1's 2 ms tasks)")
    parser.add_argument("--queued", type=int, default=0, help="tasks submitted before the first result")
    parser.add_argument("--collect", action="store_true", help="the last round's timed parts called through C")
    arguments = parser.parse_args()
    # as the scheduler process sets them
    gc.set_threshold(YOUNG_COLLECTION_ALLOCATIONS, MIDDLE_COLLECTION_YOUNG, gc.get_threshold()[2])
    if os.environ.get("PYTHONMALLOC") == "malloc":  # glibc's malloc, as the scheduler process runs on it
        try:
            from scaler.scheduler.allocator import fix_heap_thresholds
        except ImportError:  # a tree from before its thresholds were fixed
            pass
        else:
            fix_heap_thresholds()
    shape = (arguments.batch, arguments.spaced, arguments.queued)
    last = arguments.rounds - 1
    figures = [
        one_round(arguments.tasks, *shape, collect=arguments.collect and index == last) * 1e6
        for index in range(arguments.rounds)
    ]
    print(
        f"scheduler main thread, CPU per task: best {min(figures):.1f} us, median {statistics.median(figures):.1f} us "
        f"({', '.join(f'{figure:.1f}' for figure in figures)})"
    )


if __name__ == "__main__":
    main()
