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
from dataclasses import dataclass
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
    def __init__(self, workers: int = 2, capacity: int = CAPACITY, staged: int = 64) -> None:
        core = SchedulerCore(CoreSettings("tcp://s:1", "tcp://s:2", PYTHON))
        self.server = SchedulerServer(core, "tcp://s:1", "tcp://s:3", "tcp://s:2", Sockets())  # type: ignore[arg-type]
        self.outbox = Outbox()
        self.server._outbox = self.outbox  # type: ignore[assignment]
        self.server._now = self._now  # type: ignore[method-assign]
        self.router = Router()
        self.server._router = self.router  # type: ignore[assignment]
        self.now = 1.0
        self.client = PeerID(b"Client|1290487433ec4611aa2c1628629c4bc4")
        self.workers = [PeerID(b"Worker|FIX|%032x" % number) for number in range(workers)]
        self.held: dict[bytes, list[m.Task]] = {}
        #: each processor's link, and the worker it belongs to
        self.worker_of: dict[bytes, PeerID] = {}
        self.answered = 0
        self.feed(self.client, [m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "bench", m.ClientInfo())])
        for number, worker in enumerate(self.workers):
            info = m.WorkerInfo((), capacity, "", "FIX", lends_processors=True)
            self.feed(worker, [m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "bench", info)])
            link = PeerID(b"Processor|%032x" % number)
            try:  # it stages tiny tasks, as a forked processor says (a tree from before the one route: a lent one)
                processor = m.ProcessorInfo(b"processor-0", worker, lent=True, max_staged_tasks=staged)
            except TypeError:
                processor = m.ProcessorInfo(b"processor-0", worker, lent=True)
            self.feed(link, [m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "bench", processor)])
            self.held[link] = []
            self.worker_of[link] = worker
        self.outbox.take()

    def _now(self) -> float:
        return self.now

    def feed(self, peer: bytes, messages: list[Any]) -> None:
        frames = [zmq.Frame(peer)] + [zmq.Frame(codec.encode(message)) for message in messages]
        self.server._on_frames(frames)

    def feed_frames(self, peer: bytes, frames: list[bytes]) -> None:
        """One burst of the router's reads: this peer's frames, as one multipart message."""
        self.feed_burst([(peer, frames)])

    def feed_burst(self, messages: list[tuple[bytes, list[bytes]]]) -> None:
        """One burst of the router's reads: a multipart message from each of these peers, in turn."""
        self.router.in_burst = True
        for peer, frames in messages:
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


def result_frame(worker: bytes, task_frame: bytes, stamp: float, stamped: bool = True) -> bytes:
    """A processor's result for the task, with its run stamps (`stamped`: a real processor's; the scale harness's fake
    one sends none)."""
    task = codec.decode(task_frame)
    assert isinstance(task, m.Task)
    ran = m.RunStamps(stamp, stamp + 0.0001, 3583, stamp - 0.0001) if stamped else None
    return codec.encode(
        m.TaskResult(task.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"\x80\x05K\x01.", "", m.Profile(),
                     worker, ran)
    )  # fmt: skip


#: A timed part called through C (ctypes' `ffi_call`): under `valgrind --tool=callgrind --collect-atstart=no
#: --toggle-collect=ffi_call` only the timed parts are counted (`--collect`; scheduler_ab.py runs it so).
_THROUGH_C = ctypes.CFUNCTYPE(None, ctypes.py_object)


def _call_through_c(part: Callable[[], None]) -> None:
    _THROUGH_C(lambda _: part())(None)


@dataclass(frozen=True)
class Shape:
    """How the driver's peers send: `batch` tasks to a client's frame; `spaced`: each result a burst of its own (U1's
    tasks of 2 ms: a result at a time reaches the scheduler); `queued`: this many tasks submitted first (a deep queue,
    as a client that submits faster than the tasks run leaves); `workers` of `capacity` tasks, a processor's link each
    that stages `staged`; `together`: the scale harness's fake peers (`scale/fleet.py`), a client's batch and a link's
    results each one part (`codec.split` reads them), and every link's answers in one burst, as a scheduler behind
    its reads (under callgrind) finds them."""

    batch: int = 64
    spaced: bool = False
    queued: int = 0
    workers: int = 2
    capacity: int = CAPACITY
    staged: int = 64
    together: bool = False


def one_round(tasks: int, shape: Shape, collect: bool = False) -> float:
    """CPU seconds per task of the scheduler's part (results are encoded outside the timed part). `collect`: each
    timed part is called through C, for callgrind to count it alone."""
    driver = Driver(shape.workers, shape.capacity, shape.staged)
    submitted = 0
    spent = 0.0
    call: Callable[[Callable[[], None]], None] = _call_through_c if collect else (lambda part: part())

    def feed(messages: list[tuple[bytes, list[bytes]]]) -> None:
        """The timed part: frames read from peers in one burst, and what the core says sent."""
        driver.feed_burst(messages)
        driver.route()

    def timed(messages: list[tuple[bytes, list[bytes]]]) -> None:
        nonlocal spent
        started = time.process_time()
        call(functools.partial(feed, messages))
        spent += time.process_time() - started

    def submit(count: int) -> None:
        """The client's next `count` tasks, fed to the scheduler (timed)."""
        nonlocal submitted
        frames = task_frames(driver.client, submitted, count)
        submitted += count
        timed([(driver.client, [b"".join(frames)] if shape.together else frames)])

    gc.collect()
    while driver.answered < tasks:
        while submitted < min(shape.queued, tasks):
            submit(min(shape.batch, shape.queued - submitted))
        if submitted < tasks:
            submit(min(shape.batch, tasks - submitted))
        answers: list[tuple[bytes, list[bytes]]] = []
        for peer, held in driver.held.items():
            if not held:
                continue
            given, held[:] = held[:], []
            worker = driver.worker_of[peer]
            # each task of each frame (a frame may hold several messages), not the echoes naming the results read
            given = [part for frame in given for part in codec.split(frame) if _is_task(part)]
            results = [result_frame(worker, frame, driver.now, stamped=not shape.together) for frame in given]
            if shape.together:
                answers.append((peer, [b"".join(results)]))
                continue
            driver.now += 0.0005
            for burst in ([result] for result in results) if shape.spaced else [results]:
                timed([(peer, burst)])
        if answers:
            driver.now += 0.0005
            timed(answers)
    return spent / tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64, help="tasks per frame from the client")
    parser.add_argument("--spaced", action="store_true", help="each result a burst of its own (U1's 2 ms tasks)")
    parser.add_argument("--queued", type=int, default=0, help="tasks submitted before the first result")
    parser.add_argument("--collect", action="store_true", help="the last round's timed parts called through C")
    parser.add_argument("--workers", type=int, default=2, help="workers, a processor's link each")
    parser.add_argument("--capacity", type=int, default=CAPACITY, help="tasks a worker holds at once")
    parser.add_argument("--staged", type=int, default=64, help="tasks a link stages behind the one it computes")
    parser.add_argument("--together", action="store_true", help="the scale harness's fake peers (Shape)")
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
    shape = Shape(
        arguments.batch, arguments.spaced, arguments.queued, arguments.workers, arguments.capacity, arguments.staged,
        arguments.together,
    )  # fmt: skip
    last = arguments.rounds - 1
    figures = [
        one_round(arguments.tasks, shape, collect=arguments.collect and index == last) * 1e6
        for index in range(arguments.rounds)
    ]
    print(
        f"scheduler main thread, CPU per task: best {min(figures):.1f} us, median {statistics.median(figures):.1f} us "
        f"({', '.join(f'{figure:.1f}' for figure in figures)})"
    )


if __name__ == "__main__":
    main()
