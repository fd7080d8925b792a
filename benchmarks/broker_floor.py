"""W3's floor: the sequential round trip of a do-nothing asyncio ZeroMQ broker, beside ours, in one run.

    python benchmarks/broker_floor.py [--calls 500] [--rounds 3]

The floor is the least any broker design pays per task: a client DEALER sends a pickled `(inc, i)` to a broker
process (asyncio, one ROUTER for clients and one for workers, forwarding frames, nothing else), which passes it
to a worker process that unpickles it, calls it, and sends the pickled result back the same way: four hops, two
pickles each way, no bookkeeping. Ours is W3 as the suite runs it (`submit(inc, i).result()` 500 times, 2
workers, the version's default settings). Rounds alternate the two; the figure is the ratio of the medians' p50s.
Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import pickle
import statistics
import time

import zmq
import zmq.asyncio


def inc(x: int) -> int:
    return x + 1


def run_broker(front: str, back: str) -> None:
    async def main() -> None:
        context = zmq.asyncio.Context()
        clients, workers = context.socket(zmq.ROUTER), context.socket(zmq.ROUTER)
        clients.bind(front)
        workers.bind(back)
        idle: asyncio.Queue[bytes] = asyncio.Queue()

        async def from_clients() -> None:
            while True:
                client, request = await clients.recv_multipart()
                await workers.send_multipart([await idle.get(), client, request])

        async def from_workers() -> None:
            while True:
                frames = await workers.recv_multipart()
                idle.put_nowait(frames[0])
                if len(frames) == 3:
                    await clients.send_multipart(frames[1:])

        await asyncio.gather(from_clients(), from_workers())

    asyncio.run(main())


def run_worker(back: str) -> None:
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.connect(back)
    sock.send_multipart([b"ready"])
    while True:
        client, request = sock.recv_multipart()
        function, argument = pickle.loads(request)
        sock.send_multipart([client, pickle.dumps(function(argument))])


def start_floor(method: str = "spawn") -> tuple[str, list[multiprocessing.Process]]:
    """The floor's broker and its 2 workers, started on 127.0.0.1: the clients' address, the processes."""
    from scaler.io.address import free_tcp_port_block

    base = free_tcp_port_block(2)
    front, back = f"tcp://127.0.0.1:{base}", f"tcp://127.0.0.1:{base + 1}"
    context = multiprocessing.get_context(method)
    processes = [context.Process(target=run_broker, args=(front, back), daemon=True)]
    processes += [context.Process(target=run_worker, args=(back,), daemon=True) for _ in range(2)]
    for process in processes:
        process.start()
    return front, processes


def floor_p50(calls: int, front: str) -> float:
    context = zmq.Context()
    sock = context.socket(zmq.DEALER)
    sock.connect(front)
    times = []
    for i in range(calls + 20):
        started = time.perf_counter()
        sock.send(pickle.dumps((inc, i)))
        assert pickle.loads(sock.recv()) == i + 1
        if i >= 20:
            times.append(time.perf_counter() - started)
    sock.close(0)
    context.term()
    return statistics.median(times) * 1000


def ours_p50(calls: int, address: str) -> float:
    from scaler import Client

    times = []
    with Client(address=address) as client:
        for i in range(calls + 20):
            started = time.perf_counter()
            assert client.submit(inc, i).result() == i + 1
            if i >= 20:
                times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    from scaler import SchedulerClusterCombo

    front, floor_processes = start_floor()
    cluster = SchedulerClusterCombo(n_workers=2)
    floors, ours = [], []
    try:
        for _round in range(arguments.rounds):
            floors.append(floor_p50(arguments.calls, front))
            ours.append(ours_p50(arguments.calls, cluster.get_address()))
    finally:
        cluster.shutdown()
        for process in floor_processes:
            process.kill()
    floor, our = statistics.median(floors), statistics.median(ours)
    print(f"sequential round trip p50 over {arguments.calls} calls, median of {arguments.rounds} alternated rounds")
    print(f"  do-nothing asyncio zmq broker (4 hops): {floor:.3f} ms   rounds: {', '.join(f'{f:.3f}' for f in floors)}")
    print(f"  {'ours (W3, 2 workers):':<40}{our:.3f} ms   rounds: {', '.join(f'{o:.3f}' for o in ours)}")
    print(f"  ours / floor: {our / floor:.2f}x (target of #29: at most 1.5x)")


if __name__ == "__main__":
    main()
