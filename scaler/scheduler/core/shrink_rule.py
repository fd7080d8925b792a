"""When a per-task table that emptied is rebuilt to its new size.

CPython never shrinks a dict's or a set's table when entries are deleted: the task table of a scheduler that
held 1,000,000 tasks keeps its 40 MB hash table, empty, after they all ran, until something rebuilds it. The
core's per-task tables (`TaskTable.records` and its per-client sets, the reattachment tables, the graph table)
are rebuilt in place once they hold fewer than 1/`SHRINK_FACTOR` of the entries they held at their peak since
their last rebuild.

Decided by counts alone (the pure core has no clock). Amortised: a rebuild copies n entries after at least
(`SHRINK_FACTOR` - 1) n were deleted since the peak, so at most 1/7 of a copy per deletion, and a table that
only grows or stays put is never copied. Tables whose peak stayed under `MIN_PEAK` are left alone (a few
kilobytes, not worth a copy).
"""

from __future__ import annotations

from typing import Any

#: A table is rebuilt once it holds fewer than 1/SHRINK_FACTOR of the entries it held at its peak.
SHRINK_FACTOR = 8
#: ... if that peak was at least this many entries.
MIN_PEAK = 4096


class ShrinkRule:
    """Watches one table's size; says when it is due for a rebuild."""

    __slots__ = ("peak", "rebuilds")

    def __init__(self) -> None:
        self.peak = 0  #: the most entries seen since the last rebuild
        self.rebuilds = 0  #: rebuilds this rule asked for (for tests and benchmarks)

    def due(self, size: int) -> bool:
        """The table holds `size` entries now: True when it should be rebuilt now (the peak then starts again
        from `size`). Call it whenever the table may have shrunk, and often enough to see its peak (before a
        deletion: the size then is the peak, if the table grew since)."""
        if size > self.peak:
            self.peak = size
            return False
        if size * SHRINK_FACTOR >= self.peak:
            return False
        rebuild = self.peak >= MIN_PEAK
        self.peak = size
        self.rebuilds += rebuild
        return rebuild


def rebuild(table: dict[Any, Any] | set[Any]) -> None:
    """Give `table` a hash table sized for what it holds now, in place (other objects hold it)."""
    kept = table.copy()  # built entry by entry: sized for its length (a dict with deletions is not cloned)
    table.clear()  # frees the big table
    table.update(kept)
