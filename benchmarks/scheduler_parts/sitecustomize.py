"""Benchmark-only: the scheduler process's main thread CPU per part of its shell, for `scheduler_u1_cost.py --parts`.

Imported at interpreter start when this directory is on PYTHONPATH; does nothing unless `SCHEDULER_PARTS_DIR` names a
directory. Then the scheduler's server, its sockets and the event loop are wrapped so that each part's thread CPU
(`time.thread_time`, a system call of about 0.3 µs per reading) and its calls are summed, and written every half
second to `parts-<pid>.json` there. The wrappers cost CPU of their own (two readings per call): compare parts with
each other, not the total with an unwrapped run. Not a test; nothing in `scaler` imports it.
"""

from __future__ import annotations

import gc
import json
import os
import time
from typing import Any

DIRECTORY = os.environ.get("SCHEDULER_PARTS_DIR", "")


def _install() -> None:
    import asyncio
    import asyncio.base_events
    import selectors

    import scaler.io.zmq_async as zmq_async
    import scaler.protocol.codec as codec
    import scaler.scheduler.core.scheduler_core as scheduler_core
    import scaler.scheduler.server as server

    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    clock = time.thread_time

    def wrap(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        totals[label], counts[label] = 0.0, 0  # the parts in this order

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return original(*args, **kwargs)
            finally:
                totals[label] = totals.get(label, 0.0) + clock() - started
                counts[label] = counts.get(label, 0) + 1

        setattr(owner, name, wrapper)

    wrap(asyncio.base_events.BaseEventLoop, "_run_once", "loop iteration (all)")
    wrap(selectors.EpollSelector, "select", "  epoll")
    wrap(zmq_async.AsyncSocket, "_drain", "  drain (all)")
    wrap(zmq_async, "_receive", "    read a message")
    wrap(server.SchedulerServer, "_on_frames", "    decode, key checks")
    wrap(codec, "decode", "      codec.decode")
    wrap(scheduler_core.SchedulerCore, "handle_all", "    the core's step")
    wrap(scheduler_core.SchedulerCore, "_on_tick", "      of which ticks (the feed, balancing)")
    wrap(server.SchedulerServer, "_perform", "    encode")
    wrap(zmq_async.Outbox, "flush", "    flush (all)")
    wrap(zmq_async, "send_parts", "      send a message")
    wrap(zmq_async.AsyncSocket, "_has_pending", "      is a message waiting")
    collecting = [0.0]
    totals["garbage collection"], counts["garbage collection"] = 0.0, 0

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collecting[0] = clock()
        else:
            totals["garbage collection"] = totals.get("garbage collection", 0.0) + clock() - collecting[0]
            counts["garbage collection"] = counts.get("garbage collection", 0) + 1

    gc.callbacks.append(on_collection)
    run = server.SchedulerServer.run

    async def run_and_write(self: Any, *args: Any, **kwargs: Any) -> Any:
        path = os.path.join(DIRECTORY, f"parts-{os.getpid()}.json")

        def write_once() -> None:  # a small file, written whole then renamed: a reader never sees half of it
            with open(path + ".tmp", "w") as out:
                json.dump({"totals": totals, "counts": counts, "thread": clock()}, out)
            os.replace(path + ".tmp", path)

        async def write() -> None:
            while True:
                await asyncio.sleep(0.5)
                write_once()

        writer = asyncio.ensure_future(write())
        try:
            return await run(self, *args, **kwargs)
        finally:
            writer.cancel()

    server.SchedulerServer.run = run_and_write  # type: ignore[method-assign]


if DIRECTORY:
    try:
        _install()
    except ImportError:  # a process without scaler on its path
        pass
