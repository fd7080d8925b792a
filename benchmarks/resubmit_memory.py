"""What a client keeps per unfinished task to submit it again after a scheduler restart (#16): the encoded task
frame and its entry in `ClientCore`'s unfinished tasks (`{task id: (future, frame)}`), measured against the
frame's own size.

    .venv/bin/python benchmarks/resubmit_memory.py [--tasks 100000]

The scheduler has no worker, so every task stays unfinished while it is measured.
"""

from __future__ import annotations

import argparse
import sys

from scaler import Client, SchedulerClusterCombo


def add(x: int, y: int) -> int:
    return x + y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100_000)
    args = parser.parse_args()
    with SchedulerClusterCombo(n_workers=0) as cluster, Client(cluster.get_address()) as client:
        kept = client._session._agent._core._unfinished  # a measurement of the core's own record: no public name
        before = sys.getsizeof(kept)
        futures = [client.submit(add, x, 1) for x in range(args.tasks)]
        frames = [frame for _, frame in kept.values() if frame is not None]
        wire = sum(len(frame) for frame in frames)
        held = sum(sys.getsizeof(frame) for frame in frames) + sys.getsizeof(kept) - before
        held += sum(sys.getsizeof(task_id) for task_id in kept)  # the key (the task id's bytes)
        print(f"{len(frames):,} unfinished tasks: frames {wire / len(frames):.0f} bytes each on the wire; the client "
              f"keeps {held / len(frames):.0f} bytes each for resubmission ({(held - wire) / len(frames):.0f} "
              f"bytes over the frame)")  # fmt: skip
        del futures


if __name__ == "__main__":
    main()
