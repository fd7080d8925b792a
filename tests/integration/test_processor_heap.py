"""A processor keeps the C heap a task freed for the next task (scaler/worker/processor/heap.py): temporaries of a
few MB, made and freed by every task, are not faulted in again each time; `trim_memory_threshold_bytes` bounds what
is kept. glibc only: elsewhere the processor keeps the C library's defaults."""

from __future__ import annotations

import platform
import resource
from collections.abc import Callable

import pytest

from scaler import Client, SchedulerClusterCombo

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the kept heap is glibc's"),
]


def faults_per_round(rounds: int) -> float:
    """Minor page faults of this thread per round of three 2 MB temporaries made and freed (as numpy's `a * a + 1`)."""

    def one_round() -> int:
        a, b, c = bytearray(2_000_000), bytearray(2_000_000), bytearray(2_000_000)
        return len(a) + len(b) + len(c)

    one_round()
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(rounds):
        one_round()
    return (resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before) / rounds


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kept", [True, False], ids=["default", "trim-threshold-0"])
def test_a_tasks_freed_temporaries_are_not_faulted_in_again_unless_the_trim_threshold_says_so(
    make_cluster: Callable[..., SchedulerClusterCombo], kept: bool
) -> None:
    settings = {} if kept else {"trim_memory_threshold_bytes": 0}
    cluster = make_cluster(1, **settings)
    with Client(cluster.get_address()) as client:
        client.submit(faults_per_round, 2).result()  # the heap grown once
        faults = client.submit(faults_per_round, 20).result()
    # 6 MB of fresh pages is about 1,460 faults a round; kept, the pages are reused
    if kept:
        assert faults < 50, f"{faults:.0f} page faults per round: the freed heap was given back between rounds"
    else:
        assert faults > 500, f"{faults:.0f} page faults per round: the heap was kept beyond the trim threshold"
