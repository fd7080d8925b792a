"""The rig benchmark's client for Dask: `python client_dask.py SCHEDULER WORKLOAD PARAMS_JSON`, on the client host.
The shared object is scattered once (to one worker; the others fetch it from their peers). Prints one JSON line as
client_ours.py does."""

import json
import sys
import time

import numpy as np
from distributed import Client

#: How long each warm-up task holds its slot, so that every slot takes one.
WARM_HOLD_SECONDS = 0.5


def read(array, hold_seconds, index):
    value = float(array.sum())
    time.sleep(hold_seconds)
    return value


def make(seed, size):
    return np.full(size // 8, float(seed))


def reduce_parts(*parts):
    return float(sum(part[0] for part in parts))


def main():
    address, workload, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    size, tasks = params["size"], params["tasks"]
    with Client(address) as client:
        # every slot's first task (its imports): not measured
        client.gather([client.submit(read, make(0, 8), WARM_HOLD_SECONDS, index) for index in range(params["slots"])])
        started = time.monotonic()
        if workload in ("broadcast", "shared"):
            [reference] = client.scatter([np.ones(size // 8)])
            published = time.monotonic()
            futures = [client.submit(read, reference, params["hold_seconds"], index) for index in range(tasks)]
            right = client.gather(futures) == [size // 8] * tasks
        elif workload == "gather":
            published = started
            values = client.gather([client.submit(make, index, size, pure=False) for index in range(tasks)])
            right = all(value[0] == index for index, value in enumerate(values))
        elif workload == "loop":
            published = started
            futures = [client.submit(make, index, size, pure=False) for index in range(tasks)]
            values = [future.result() for future in futures]
            right = all(value[0] == index for index, value in enumerate(values))
        elif workload == "shuffle":
            published, hosts = started, params["hosts"]
            parts = [[client.submit(make, i * hosts + j, size, pure=False) for j in range(hosts)] for i in range(hosts)]
            reduced = client.gather(
                [client.submit(reduce_parts, *[parts[i][j] for i in range(hosts)], pure=False) for j in range(hosts)]
            )
            right = reduced == [float(sum(i * hosts + j for i in range(hosts))) for j in range(hosts)]
        else:
            raise SystemExit(f"unknown workload {workload}")
        ended = time.monotonic()
    print(json.dumps({"seconds": ended - started, "task_seconds": ended - published, "right": right}))


if __name__ == "__main__":
    main()
