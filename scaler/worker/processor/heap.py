"""What a processor's C heap keeps between tasks (glibc only; elsewhere nothing is changed).

A task that makes numpy temporaries of a few MB (U1's Monte Carlo makes three of 2 MB per call) frees them before
the next task. glibc's defaults give those pages back to the kernel as soon as more than twice the largest freed
block sits free at the top of the main heap, so the next task faults every page in again, zeroed: 945 page faults
and about 0.8 ms of kernel time per 1.4 ms task on this machine. Tasks run on the processor's main thread, whose heap
is the one trimmed that way; a worker thread's heap (Dask's tasks run there) is not.

`keep_freed_heap` sets two thresholds once, at the processor's start:
- blocks up to `MMAP_THRESHOLD_BYTES` (32 MiB, glibc's own upper bound for the dynamic threshold) come from the heap,
  not from a mapping of their own;
- up to `KEPT_TOP_BYTES` (64 MiB, never more than the worker's `trim_memory_threshold_bytes`) of free heap top is
  kept for the next task.
What it keeps is bounded by that, and the processor's periodic collection still trims the heap when its resident
memory passes `trim_memory_threshold_bytes` (process.py). A block above 32 MiB is mapped and unmapped as before.
"""

from __future__ import annotations

import ctypes
import logging

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  #: mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20
KEPT_TOP_BYTES = 64 << 20


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def keep_freed_heap(trim_memory_threshold_bytes: int) -> bool:
    """Keep freed heap memory for the next task, as above; False where the C library is not glibc (nothing set)."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        logger.debug("the C library is not glibc: the processor's heap keeps its defaults")
        return False
    kept = max(0, min(KEPT_TOP_BYTES, trim_memory_threshold_bytes))
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(libc.mallopt(M_TRIM_THRESHOLD, kept))


def trim_heap() -> None:
    """Give the heap's free pages back to the kernel (glibc's malloc_trim); nothing where it is not glibc."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
