"""The scheduler process runs on the C library's allocator (glibc's malloc), not on CPython's small-object one.

Why: after a big queue drains, CPython's allocator (pymalloc) gives a 1 MiB arena back only once every object in it is
freed, and the few objects that outlive a drain (the stories kept, the workers' latest heartbeats, spare objects of
the free lists) sit in arenas all over the memory the queue filled. glibc's `malloc_trim`, which the scheduler calls
once a big queue has drained (`heap.MemoryReturn`), gives back every free page wherever it is. A 100,000-task drain
in process keeps 35% of its growth on pymalloc, 17% on glibc's malloc, for about 1 µs (2-4%) more of the scheduler's
CPU per task (docs/guide/scale.md, "Why it stays small").

Its thresholds are fixed too (`fix_heap_thresholds`): by default glibc raises the size from which a block gets a
mapping of its own to that of each big block freed, and the free top it keeps to twice that. After a drain has freed
the queue's tables, the next queue's tables and the kept stories (a few MB) then come from the heap, and where they
land moves from queue to queue; the pages around them stay. Fixed at 128 KiB, each such block is a mapping of its own,
given back the moment it is freed: over repeated drains of 200,000 tasks the RSS settles (after ten of them 75 MB
instead of 81), glibc's main heap flat from the second on.

How: the allocator is chosen when the interpreter starts (`PYTHONMALLOC`), so the scheduler's entry points call
`use_the_system_allocator` before anything else: on Linux with glibc, and unless PYTHONMALLOC is set already, the
process executes itself again (the same pid, arguments and descriptors) with PYTHONMALLOC=malloc; the variable then
leaves its environment, so that the processes it starts (its object storage) get the interpreter's default. A
PYTHONMALLOC the user set (`PYTHONMALLOC=pymalloc` keeps CPython's) is obeyed.
"""

from __future__ import annotations

import os
import sys

#: Set with PYTHONMALLOC when the scheduler executes itself again: the variables it set, removed once it runs.
MARK = "SCALER_SCHEDULER_SYSTEM_ALLOCATOR"


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError, AttributeError):  # not glibc (musl, macOS, Windows): no malloc_trim either
        return False


def use_the_system_allocator() -> None:
    """Called first by the scheduler's entry points (never by a process that runs a scheduler among other things):
    returns at once where nothing is to be done, else does not return (the process runs again from its start)."""
    if os.environ.pop(MARK, None) is not None:  # this is the process started again: its children get the default
        os.environ.pop("PYTHONMALLOC", None)
        fix_heap_thresholds()
        return
    if "PYTHONMALLOC" in os.environ or not sys.platform.startswith("linux") or not _glibc() or not sys.executable:
        return
    environment = dict(os.environ, PYTHONMALLOC="malloc")
    environment[MARK] = "1"
    try:
        os.execve(sys.executable, sys.orig_argv, environment)
    except OSError:  # not started again: runs on CPython's allocator, as before
        return


#: Blocks from this size on get a mapping of their own, and free heap top beyond it goes back (glibc's default for both
#: before it moves them: 128 KiB).
HEAP_THRESHOLD_BYTES = 128 << 10
M_TRIM_THRESHOLD = -1  #: mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3


def fix_heap_thresholds(threshold_bytes: int = HEAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mapping and trimming thresholds at `threshold_bytes` (glibc then never moves them); False where
    the C library is not glibc (nothing set)."""
    if not _glibc():
        return False
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold_bytes)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, threshold_bytes)
    )
