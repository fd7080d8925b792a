"""The rig benchmark's client for ours: `python client_ours.py SCHEDULER WORKLOAD PARAMS_JSON`, on the client host.
Prints one JSON line: the workload's seconds (all of it, and from the object's publication on), and whether the
answers were right."""

import json
import sys
import time

import numpy as np

from scaler import Client

#: How long each warm-up task holds its slot, so that every slot takes one.
WARM_HOLD_SECONDS = 0.5


def read(array, hold_seconds):
    value = float(array.sum())
    time.sleep(hold_seconds)  # holds its slot a moment, so that every slot takes a task
    return value


def make(seed, size):
    return np.full(size // 8, float(seed))


def reduce_parts(*parts):
    return float(sum(part[0] for part in parts))


def main():
    address, workload, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    size, tasks = params["size"], params["tasks"]
    with Client(address=address) as client:
        # the functions' upload, and every slot's first task (its imports): not measured
        client.gather([client.submit(read, make(0, 8), WARM_HOLD_SECONDS) for _ in range(params["slots"])])
        started = time.monotonic()
        if workload in ("broadcast", "shared"):
            reference = client.send_object(np.ones(size // 8), name="shared")
            published = time.monotonic()
            futures = [client.submit(read, reference, params["hold_seconds"]) for _ in range(tasks)]
            right = [future.result() for future in futures] == [size // 8] * tasks
        elif workload == "gather":
            published = started
            futures = [client.submit(make, index, size) for index in range(tasks)]
            values = client.gather(futures)  # as Dask's client.gather and Ray's ray.get of the list
            right = all(value[0] == index for index, value in enumerate(values))
        elif workload == "loop":
            published = started
            futures = [client.submit(make, index, size) for index in range(tasks)]
            values = [future.result() for future in futures]
            right = all(value[0] == index for index, value in enumerate(values))
        elif workload == "shuffle":  # one graph: the makers' partitions go to the reducers as their arguments
            published, hosts = started, params["hosts"]
            graph = {f"part-{i}-{j}": (make, i * hosts + j, size) for i in range(hosts) for j in range(hosts)}
            graph.update(
                {f"reduce-{j}": (reduce_parts, *[f"part-{i}-{j}" for i in range(hosts)]) for j in range(hosts)}
            )
            reduced = client.get(graph, [f"reduce-{j}" for j in range(hosts)])
            right = [reduced[f"reduce-{j}"] for j in range(hosts)] == [
                float(sum(i * hosts + j for i in range(hosts))) for j in range(hosts)
            ]
        else:
            raise SystemExit(f"unknown workload {workload}")
        ended = time.monotonic()
    print(json.dumps({"seconds": ended - started, "task_seconds": ended - published, "right": right}))


if __name__ == "__main__":
    main()
