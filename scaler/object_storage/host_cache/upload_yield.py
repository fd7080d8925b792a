"""When a host cache's large upload yields to the reads other hosts make of this host (pure: the shell measures and
sleeps). Why: a result held by its host (held_results.py) is read by other hosts' caches from here while its upload,
and the uploads of this host's other results, go to the storage server on the same link. The uploads serve durability
and readers at the storage server; the reads are what other hosts' tasks wait for. Sharing the link, both go at half
its rate; a shuffle's maker host sends its partitions to the storage server and to the reducers' hosts at once, and
the reducers wait twice as long. So an upload waits while this host sends other hosts what they read. Rules:

Y1 An upload goes at once when nothing this host sends other hosts waits to leave (the kernel's send queues of the
   connections it serves them on are empty).
Y2 Otherwise it waits, and looks again after POLL_SECONDS.
Y3 Bounded: an upload waits at most MAX_YIELD_SECONDS in all, then goes whatever is being sent (a result's upload never
   starves behind a stream of reads; until it is stored, its host's death has it made again from its task).
"""

from __future__ import annotations

#: How often a waiting upload looks again (Y2).
POLL_SECONDS = 0.05
#: The longest an upload waits for other hosts' reads (Y3): a few 10 MB partitions at 100 Mbit/s.
MAX_YIELD_SECONDS = 5.0


def wait_seconds(queued_to_peers: int, waited: float) -> float:
    """How long an upload that has waited `waited` seconds waits now before looking again (0: it goes), while
    `queued_to_peers` bytes this host sends other hosts wait to leave (Y1-Y3)."""
    if queued_to_peers <= 0 or waited >= MAX_YIELD_SECONDS:
        return 0.0
    return min(POLL_SECONDS, MAX_YIELD_SECONDS - waited)
