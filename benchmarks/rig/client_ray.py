"""The rig benchmark's client for Ray: `python client_ray.py HEAD WORKLOAD PARAMS_JSON`, on the client host (a 0-CPU
node of its own: a Ray driver needs a raylet on its host). Tasks are placed SPREAD (Ray's default put a broadcast's
tasks all on one node). Prints one JSON line as client_ours.py does."""

import json
import sys
import time

import numpy as np
import ray

#: How long each warm-up task holds its slot, so that every slot takes one.
WARM_HOLD_SECONDS = 0.5


@ray.remote(scheduling_strategy="SPREAD")
def read(array, hold_seconds):
    value = float(array.sum())
    time.sleep(hold_seconds)
    return value


@ray.remote(scheduling_strategy="SPREAD")
def make(seed, size):
    return np.full(size // 8, float(seed))


@ray.remote(scheduling_strategy="SPREAD")
def reduce_parts(*parts):
    return float(sum(part[0] for part in parts))


def main():
    address, workload, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    size, tasks = params["size"], params["tasks"]
    ray.init(address=address, _node_ip_address=params["client_ip"], logging_level="WARNING", log_to_driver=False)
    # every slot's first task (its imports): not measured
    ray.get([read.remote(np.zeros(1), WARM_HOLD_SECONDS) for _ in range(params["slots"])])
    started = time.monotonic()
    if workload in ("broadcast", "shared"):
        reference = ray.put(np.ones(size // 8))
        published = time.monotonic()
        values = ray.get([read.remote(reference, params["hold_seconds"]) for _ in range(tasks)])
        right = values == [size // 8] * tasks
    elif workload == "gather":
        published = started
        values = ray.get([make.remote(index, size) for index in range(tasks)])
        right = all(value[0] == index for index, value in enumerate(values))
    elif workload == "loop":
        published = started
        values = [ray.get(reference) for reference in [make.remote(index, size) for index in range(tasks)]]
        right = all(value[0] == index for index, value in enumerate(values))
    elif workload == "shuffle":
        published, hosts = started, params["hosts"]
        parts = [[make.remote(i * hosts + j, size) for j in range(hosts)] for i in range(hosts)]
        reduced = ray.get([reduce_parts.remote(*[parts[i][j] for i in range(hosts)]) for j in range(hosts)])
        right = reduced == [float(sum(i * hosts + j for i in range(hosts))) for j in range(hosts)]
    else:
        raise SystemExit(f"unknown workload {workload}")
    ended = time.monotonic()
    ray.shutdown()
    print(json.dumps({"seconds": ended - started, "task_seconds": ended - published, "right": right}))


if __name__ == "__main__":
    main()
