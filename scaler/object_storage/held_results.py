"""Results a host cache holds and will upload, as the storage server knows them (pure): a large result is reported
done once its host holds it and this server recorded so, not once its upload ended (docs/architecture.md, "Results
held by their host"). No I/O, no clock. Rules:

H1 `hold`: a host cache (its connection, `holder`) says it holds an object and will upload it. From then on the object
   is *held*: not stored here (nothing counts it), but `exists` says yes, its holder is the object's source for other
   hosts (host_ledger S4), and a read of it waits (H2). A hold of an object stored already records nothing; a hold of
   an object lost before (H4) takes it over: its readers go on waiting, now for this holder's upload.
H2 `wait`: a read of a held object waits for it to be stored; the first read of it asks that its upload go ahead of
   the others (`ahead`: upload_admission gives its turn first).
H3 `stored`: the object was stored here (its holder's upload, or any put or adopt of it: a task made again): the reads
   that waited, to answer as reads of a stored object; it is forgotten. `refused`: its upload was refused (no room):
   the reads that waited, to answer with why; forgotten too.
H4 `ended`: connections ended. An object whose holder's connection it was and that is not stored yet is *lost*: its
   loss count goes up and it has no holder; its readers go on waiting (the scheduler, told, runs its task again, whose
   put of the same object ends the wait: H3).
H5 `forget`: deleted objects (or their owner's): the reads that waited, to answer "not stored".
H6 `fate`: what the scheduler is told of an object: NOTHING_TO_WAIT_FOR when none is held or lost here (stored, or
   deleted, or never held), else how many times it was lost (0: held, its upload under way).
H8 `wanted` (the service's, from these records): a host cache whose upload of a held object yields to other hosts'
   reads (host_cache/upload_yield.py) asks whether a reader waits for it here (then it goes at once: a reader at the
   server goes first) and learns when the object is neither held nor stored (deleted: it is not uploaded).
H7 Bounded: at most MAX_HELD objects are held or lost at once; a hold beyond that is refused (the cache then answers
   its put once the upload is stored, as without holds), so the server's memory for them stays small.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

#: The most objects held or lost at once (H7).
MAX_HELD = 100_000
#: `fate` of an object with nothing to wait for (H6).
NOTHING_TO_WAIT_FOR = -1

R = TypeVar("R")  #: a waiting read, as the service remembers it


@dataclass(slots=True)
class Held(Generic[R]):
    """One object held by a host cache, or lost by one."""

    owner_id: bytes
    total_bytes: int
    holder: bytes  #: the connection that holds it; b"": none (lost)
    holder_address: str  #: where other hosts' caches reach its holder ("" none)
    piece_digests: tuple[bytes, ...]  #: of its pieces, as its holder took them (other hosts check what it sends)
    losses: int = 0
    reads: list[R] = field(default_factory=list)
    ahead: bool = False  #: a read asked for its upload to go first (H2)


class HeldResults(Generic[R]):
    """The held and lost objects (module docstring), by id."""

    def __init__(self, max_held: int = MAX_HELD) -> None:
        self._held: dict[bytes, Held[R]] = {}
        self._by_holder: dict[bytes, set[bytes]] = {}
        self._max_held = max_held

    def __contains__(self, object_id: bytes) -> bool:
        return object_id in self._held

    def __len__(self) -> int:
        return len(self._held)

    def get(self, object_id: bytes) -> Held[R] | None:
        return self._held.get(object_id)

    def holds(self, holder: bytes) -> bool:
        """Whether this connection holds objects not stored yet (its end loses them: H4)."""
        return bool(self._by_holder.get(holder))

    def hold(
        self, object_id: bytes, owner_id: bytes, total_bytes: int, holder: bytes, holder_address: str = "",
        piece_digests: tuple[bytes, ...] = (),
    ) -> bool:  # fmt: skip
        """H1 (the caller checked it is not stored): False when the bound refuses it (H7)."""
        known = self._held.get(object_id)
        if known is None:
            if len(self._held) >= self._max_held:
                return False
            known = self._held[object_id] = Held(owner_id, total_bytes, holder, holder_address, piece_digests)
        else:
            self._release(object_id, known)
            known.holder, known.holder_address, known.piece_digests = holder, holder_address, piece_digests
            known.owner_id, known.total_bytes = owner_id, total_bytes
        self._by_holder.setdefault(holder, set()).add(object_id)
        return True

    def wait(self, object_id: bytes, read: R) -> bool:
        """H2: True when this read is the first to ask for the object's upload to go ahead."""
        held = self._held[object_id]
        held.reads.append(read)
        first, held.ahead = not held.ahead, True
        return first

    def stored(self, object_id: bytes) -> list[R]:
        """H3: the reads that waited for it (none when it was not held)."""
        held = self._held.pop(object_id, None)
        if held is None:
            return []
        self._release(object_id, held)
        return held.reads

    def refused(self, object_id: bytes) -> list[R]:
        """H3: its upload was refused: the reads that waited for it, to answer with why."""
        return self.stored(object_id)

    def ended(self, holders: Iterable[bytes]) -> list[bytes]:
        """H4: the objects lost with these connections."""
        lost: list[bytes] = []
        for holder in holders:
            for object_id in sorted(self._by_holder.pop(holder, ())):
                held = self._held[object_id]
                held.holder, held.holder_address, held.piece_digests = b"", "", ()
                held.losses += 1
                lost.append(object_id)
        return lost

    def forget(self, object_ids: Iterable[bytes]) -> list[R]:
        """H5: the reads that waited for these objects."""
        reads: list[R] = []
        for object_id in object_ids:
            reads += self.stored(bytes(object_id))
        return reads

    def owned_by(self, owner_id: bytes) -> list[bytes]:
        return [object_id for object_id, held in self._held.items() if held.owner_id == owner_id]

    def fate(self, object_id: bytes) -> int:
        """H6."""
        held = self._held.get(object_id)
        return NOTHING_TO_WAIT_FOR if held is None else held.losses

    def _release(self, object_id: bytes, held: Held[R]) -> None:
        if not held.holder:
            return
        holding = self._by_holder.get(held.holder)
        if holding is not None:
            holding.discard(object_id)
            if not holding:
                del self._by_holder[held.holder]
