"""Fake workers and clients that speak the scheduler's protocol, many to one process (the scale harness's peers).

    python -m scale.fleet tcp://127.0.0.1:PORT --workers 5000 --capacity 2      # commands on stdin, answers on stdout

A fake worker registers (Hello with WorkerInfo, one slot), heartbeats every HEARTBEAT_SECONDS, or at the longer
period the scheduler gives it (its HelloReply, then each HeartbeatEcho), as a real worker agent does, with what a real
agent's heartbeat carries (its status, one processor), and opens its processor's link (`<worker id>/p1`, Hello with
ProcessorInfo: since protocol version 4 a worker's tasks come on its processors' links only), which answers every task
it is sent at once, in one message per message received. `--links N`: only the first N workers open a link (each
link is a connection more at the scheduler: 10,000 workers with one each need 20,000 descriptors, the most this
machine's hard limit allows a process); the others register and heartbeat, holding no task.

A fake client registers, heartbeats with the count of answers it received (the scheduler forgets acknowledged
answers by it), and submits no-op tasks in batches of SUBMIT_BATCH, one part per batch, keeping at most
`window` unanswered. Both check what they see: a task a worker is sent twice, an answer a client gets twice or for a
task it never submitted.

Commands are JSON lines on stdin, each answered by one JSON line on stdout:
  {"op": "connect"}                        connects every peer; answered once all are registered
  {"op": "submit", "tasks": N, "window": W, "all_at_once": false}
                                           each client submits its share of N (answered at once)
  {"op": "wait", "answered": N, "timeout": S, "half_counts": false}
                                           answered when the clients together have N answers (or at the timeout);
                                           `half_counts`: with each client's count when half of N was reached
  {"op": "report"}                         what every peer saw
  {"op": "leave"}                          clients disconnect (ClientDisconnect) and close; workers stay
  {"op": "stop"}                           everything closes; the process exits
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import sys
import threading
import time
from typing import Any

from scale.zmtp import Dealer
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID

HEARTBEAT_SECONDS = 2.0
SUBMIT_BATCH = 100  #: tasks per message a client sends (a real client's submit loop joins what it has)
CONNECTS_AT_ONCE = 200  #: connections opened at a time (the ROUTER's backlog is ZeroMQ's default, 100)
PYTHON = "{}.{}".format(*sys.version_info[:2])
HOSTNAME = socket.gethostname()
#: what a no-op call's result holds inline: pickle of None
RESULT_PAYLOAD = b"\x80\x05N."
#: a TaskBody's size for a small call whose function is in storage (the scheduler never reads it)
BODY = bytes(range(136))


def _hello(info: m.RoleInfo) -> bytes:
    return codec.encode(m.Hello(m.PROTOCOL_VERSION, PYTHON, os.getpid(), HOSTNAME, info))


def _heartbeat() -> bytes:
    """What a real worker agent with one idle processor sends (worker/agent/shell.py `_heartbeat`)."""
    processor = m.ProcessorStatus(os.getpid(), 0.0, 60 << 20, "idle", 60 << 20)
    status = m.WorkerStatus(0, 0, 0, 16 << 30, (processor,), 90 << 20, 8 << 30, "machine")
    return codec.encode(m.Heartbeat(0.5, 30 << 20, worker=status, round_trip_seconds=0.0004))


class FakePeer:
    """What a fake worker and a fake client share: how they take the scheduler's answer to their Hello and the
    protocol errors it sends them."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.registered = False
        self.period = HEARTBEAT_SECONDS  #: its heartbeat period

    def _accepted(self, reply: m.HelloReply) -> None:
        """Its hello was accepted: counted (a worker: once its processor's link is accepted too)."""
        raise NotImplementedError

    def _beat(self) -> None:
        raise NotImplementedError

    def _on_reply(self, message: object) -> None:
        """A HelloReply (accepted: `_accepted`, heartbeats start at a random phase of its period; refused: its reason
        kept) or a ProtocolError (its reason kept); any other message is ignored."""
        fleet = self.fleet
        if type(message) is m.HelloReply:
            if message.accepted and not self.registered:
                self.registered = True
                self._accepted(message)
                fleet.registering.set()
                fleet.loop.call_later(random.uniform(0, self.period), self._beat)
            elif not message.accepted:
                fleet.refusals.append(message.reason)
        elif type(message) is m.ProtocolError:
            fleet.protocol_errors.append(message.reason)


class FakeWorker(FakePeer):
    def __init__(self, fleet: Fleet, number: int, capacity: int, with_link: bool) -> None:
        super().__init__(fleet)
        self.identity = b"Worker|FAKE|%s%08d" % (fleet.tag, number)
        self.capacity = capacity
        self.link = Dealer(self.identity, self._on_message, on_lost=self._on_lost)
        #: its processor's link (`<worker id>/p1`): its tasks come there
        self.processor = Dealer(self.identity + b"/p1", self._on_processor) if with_link else None

    def _on_lost(self) -> None:
        if self.registered:
            self.fleet.lost_workers += 1

    def _on_message(self, parts: list[bytes]) -> None:
        """What the scheduler tells the worker agent."""
        for part in parts:
            for frame in codec.split(part):
                message = codec.decode(frame)
                if type(message) is m.HeartbeatEcho:
                    self._given(message)
                else:
                    self._on_reply(message)

    def _accepted(self, reply: m.HelloReply) -> None:
        """Its period given; counted at once without a link, else once its processor's link is accepted."""
        self._given(reply)
        if self.processor is None:
            self._ready()
            return
        fleet = self.fleet
        fleet.opening.add(task := fleet.loop.create_task(fleet.open(self.processor)))
        task.add_done_callback(fleet.opening.discard)
        info = m.ProcessorInfo(b"p1", self.identity, max_staged_tasks=max(0, self.capacity - 1))
        self.processor.send([_hello(info)])

    def _ready(self) -> None:
        """Registered, and its link accepted when it has one: counted."""
        self.fleet.registered_workers += 1
        self.fleet.registering.set()

    def _on_processor(self, parts: list[bytes]) -> None:
        """What the scheduler sends on the processor's link: tasks, answered at once."""
        fleet = self.fleet
        fleet.link_messages += 1
        results: list[bytes] = []
        for part in parts:
            for frame in codec.split(part):
                message = codec.decode(frame)
                if type(message) is m.Task:
                    fleet.tasks_received += 1
                    if message.task_id in fleet.seen_tasks:
                        fleet.tasks_twice += 1
                    fleet.seen_tasks.add(message.task_id)
                    result = m.TaskResult(message.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE,
                                          RESULT_PAYLOAD, worker_id=self.identity)  # fmt: skip
                    results.append(codec.encode(result))
                elif type(message) is m.TaskReturn:  # asked back: answered already (every task is, at once)
                    fleet.tasks_asked_back += len(message.task_ids)
                elif type(message) is m.HelloReply:
                    if message.accepted:
                        self._ready()
                    else:
                        fleet.refusals.append(message.reason)
                elif type(message) is m.ProtocolError:
                    fleet.protocol_errors.append(message.reason)
        if results and self.processor is not None:
            self.processor.send([b"".join(results)])

    def _given(self, message: m.HelloReply | m.HeartbeatEcho) -> None:
        """The period the scheduler gives, obeyed when longer than HEARTBEAT_SECONDS (as a worker agent does:
        scaler/protocol/heartbeat_period.py, rule 3; an older scheduler gives none, or 2 s)."""
        given = getattr(message, "heartbeat_interval_seconds", 0.0)
        self.period = max(HEARTBEAT_SECONDS, min(given, 600.0)) if given > 0 else HEARTBEAT_SECONDS

    def _beat(self) -> None:
        if self.link.transport is None or self.fleet.stopping:
            return
        self.link.send([self.fleet.heartbeat])
        self.fleet.heartbeats_sent += 1
        self.fleet.loop.call_later(self.period, self._beat)

    def hello(self) -> None:
        self.link.send([_hello(m.WorkerInfo((), self.capacity, "", "FAKE", slots=1))])


class FakeClient(FakePeer):
    def __init__(self, fleet: Fleet, number: int) -> None:
        super().__init__(fleet)
        self.identity = b"Client|fake|%s%06d" % (fleet.tag, number)
        self.link = Dealer(self.identity, self._on_message)
        self.prefix = os.urandom(4) + number.to_bytes(4, "big")
        self.next_task = 0
        self.to_submit = 0  #: tasks still to submit
        self.window = 0
        self.unanswered: set[TaskID] = set()
        self.answered = 0
        self.answers_twice = 0
        self.answers_unknown = 0
        self.done: set[TaskID] = set()

    def _on_message(self, parts: list[bytes]) -> None:
        self.fleet.client_messages += 1
        for part in parts:
            for frame in codec.split(part):
                message = codec.decode(frame)
                if type(message) is m.TaskResult:
                    self._answer(message.task_id)
                else:
                    self._on_reply(message)
        self._submit()

    def _accepted(self, reply: m.HelloReply) -> None:
        self.fleet.registered_clients += 1

    def _answer(self, task_id: TaskID) -> None:
        fleet = self.fleet
        if task_id in self.unanswered:
            self.unanswered.discard(task_id)
            self.answered += 1
            fleet.answered += 1
            if fleet.track_done:
                self.done.add(task_id)
            fleet.check_waiters()
        elif task_id in self.done:
            self.answers_twice += 1
        else:
            self.answers_unknown += 1

    def _beat(self) -> None:
        if self.link.transport is None or self.fleet.stopping:
            return
        self.link.send([codec.encode(m.Heartbeat(answers_epoch=0, answers_received=self.answered))])
        self.fleet.loop.call_later(HEARTBEAT_SECONDS, self._beat)

    def hello(self) -> None:
        self.link.send([_hello(m.ClientInfo(name=f"fake-{self.identity[-6:].decode()}"))])

    def _submit(self) -> None:
        """Sends what the window allows, a batch per part."""
        client_id = ClientID(self.identity)
        while self.to_submit > 0 and len(self.unanswered) < self.window:
            count = min(SUBMIT_BATCH, self.to_submit, self.window - len(self.unanswered))
            frames = []
            for _ in range(count):
                task_id = TaskID(self.prefix + self.next_task.to_bytes(8, "big"))
                self.next_task += 1
                self.unanswered.add(task_id)
                frames.append(codec.encode(m.Task(task_id, client_id, BODY, "noop")))
            self.to_submit -= count
            self.fleet.submitted += count
            self.link.send([b"".join(frames)])


class Fleet:
    def __init__(self, address: str, workers: int, clients: int, capacity: int, tag: bytes, links: int) -> None:
        self.loop = asyncio.get_running_loop()
        host, port = address.removeprefix("tcp://").rsplit(":", 1)
        self.host, self.port = host, int(port)
        self.tag = tag
        self.heartbeat = _heartbeat()
        self.workers = [FakeWorker(self, number, capacity, number < links) for number in range(workers)]
        self.clients = [FakeClient(self, number) for number in range(clients)]
        self.stopping = False
        self.opening: set[asyncio.Task[None]] = set()  #: processors' links being opened
        self.registered_workers = self.registered_clients = self.lost_workers = 0
        self.tasks_received = self.tasks_twice = 0
        self.link_messages = 0  #: messages the processors' links received (tasks in one message: the outbox joins them)
        self.client_messages = 0  #: messages the clients received (answers in one message: the outbox joins them)
        self.tasks_asked_back = 0  #: named in a TaskReturn (processor_links.py rule 3: behind a task sent 1 s ago)
        self.heartbeats_sent = 0  #: by the workers, so far
        self.seen_tasks: set[TaskID] = set()
        self.submitted = self.answered = 0
        self.track_done = True
        self.refusals: list[str] = []
        self.registering = asyncio.Event()  #: set at each registration
        self.protocol_errors: list[str] = []
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.half_counts: list[int] | None = None
        self._half_at = 0

    async def connect(self, timeout: float) -> dict[str, Any]:
        started = time.monotonic()
        peers: list[FakeWorker | FakeClient] = [*self.workers, *self.clients]
        for first in range(0, len(peers), CONNECTS_AT_ONCE):
            batch = peers[first : first + CONNECTS_AT_ONCE]
            await asyncio.gather(*(self.open(peer.link) for peer in batch))
            for peer in batch:
                peer.hello()
            while self._registered() < first + len(batch) and time.monotonic() - started < timeout:
                self.registering.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.registering.wait(), 0.5)
        return {"registered_workers": self.registered_workers, "registered_clients": self.registered_clients,
                "seconds": time.monotonic() - started, "refusals": self.refusals[:3]}  # fmt: skip

    def _registered(self) -> int:
        return self.registered_workers + self.registered_clients

    async def open(self, link: Dealer) -> None:
        for attempt in range(20):
            try:
                await self.loop.create_connection(lambda: link, self.host, self.port)
                return
            except OSError:
                await asyncio.sleep(0.05 * (attempt + 1))
        raise ConnectionError(f"could not connect to {self.host}:{self.port}")

    def submit(self, tasks: int, window: int, all_at_once: bool) -> dict[str, Any]:
        count = len(self.clients)
        for number, client in enumerate(self.clients):
            client.to_submit += tasks // count + (1 if number < tasks % count else 0)
            client.window = client.to_submit + len(client.unanswered) if all_at_once else max(1, window // count)
            client._submit()
        return {"submitted": self.submitted}

    async def wait(self, answered: int, timeout: float, half_counts: bool) -> dict[str, Any]:
        self.half_counts = None
        self._half_at = (self.answered + answered) // 2 if half_counts else 0
        future: asyncio.Future[None] = self.loop.create_future()
        self._waiters.append((answered, future))
        self.check_waiters()
        try:
            await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            pass
        return {"answered": self.answered, "half_counts": self.half_counts}

    def check_waiters(self) -> None:
        if self._half_at and self.answered >= self._half_at and self.half_counts is None:
            self.half_counts = [client.answered for client in self.clients]
        if self._waiters:
            for waiter in [w for w in self._waiters if self.answered >= w[0]]:
                self._waiters.remove(waiter)
                if not waiter[1].done():
                    waiter[1].set_result(None)

    def report(self) -> dict[str, Any]:
        clients = self.clients
        return {
            "registered_workers": self.registered_workers,
            "registered_clients": self.registered_clients,
            "lost_workers": self.lost_workers,
            "workers_with_a_link": sum(1 for worker in self.workers if worker.processor is not None),
            "heartbeats_sent": self.heartbeats_sent,
            "longest_period": max((worker.period for worker in self.workers), default=0.0),
            "tasks_received": self.tasks_received,
            "tasks_twice": self.tasks_twice,
            "tasks_asked_back": self.tasks_asked_back,
            "link_messages": self.link_messages,
            "client_messages": self.client_messages,
            "submitted": self.submitted,
            "answered": self.answered,
            "unanswered": sum(len(client.unanswered) for client in clients),
            "answers_twice": sum(client.answers_twice for client in clients),
            "answers_unknown": sum(client.answers_unknown for client in clients),
            "per_client": [client.answered for client in clients],
            "protocol_errors": self.protocol_errors[:5],
        }

    def leave(self) -> dict[str, Any]:
        for client in self.clients:
            client.link.send([codec.encode(m.ClientDisconnect())])
        self.loop.call_later(0.5, lambda: [client.link.close() for client in self.clients])
        return {"left": len(self.clients)}

    def stop(self) -> dict[str, Any]:
        self.stopping = True
        for peer in [*self.workers, *self.clients]:
            peer.link.close()
        for worker in self.workers:
            if worker.processor is not None:
                worker.processor.close()
        return {"stopped": True}


async def serve(arguments: argparse.Namespace) -> None:
    links = arguments.workers if arguments.links is None else arguments.links
    fleet = Fleet(arguments.address, arguments.workers, arguments.clients, arguments.capacity,
                  arguments.tag.encode(), links)  # fmt: skip
    commands: asyncio.Queue[str] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    def read_stdin() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(commands.put_nowait, line)
        loop.call_soon_threadsafe(commands.put_nowait, '{"op": "stop"}')

    threading.Thread(target=read_stdin, daemon=True).start()
    while True:
        command = json.loads(await commands.get())
        op = command["op"]
        if op == "connect":
            answer = await fleet.connect(command.get("timeout", 600))
        elif op == "submit":
            answer = fleet.submit(command["tasks"], command.get("window", 10_000), command.get("all_at_once", False))
        elif op == "wait":
            timeout, half = command.get("timeout", 600), command.get("half_counts", False)
            answer = await fleet.wait(command["answered"], timeout, half)
        elif op == "report":
            answer = fleet.report()
        elif op == "leave":
            answer = fleet.leave()
        else:
            answer = fleet.stop()
        print(json.dumps(answer), flush=True)
        if op == "stop":
            await asyncio.sleep(0.2)
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("address")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--clients", type=int, default=0)
    parser.add_argument("--capacity", type=int, default=2, help="tasks a fake worker accepts at once")
    parser.add_argument("--tag", default="a", help="tells the peers of several fleets apart")
    parser.add_argument("--links", type=int, help="workers that open a processor's link (default: all)")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
