"""The cache role of an object storage server (pure): what a host cache does that the storage server does not.

A host cache is a `StorageService` whose objects come from an upstream storage server and whose puts go there too.
The service asks this class at the few points where the role differs and carries out what it says; the shell takes
the upstream work (`take_work`) and reports back. Rules:

C1. A read (get, getMapped, getInParts) of an object the cache neither holds nor is fetching waits, and a `Fetch` of
    it is asked for, once per object however many readers wait.
C2. A fetch whose upstream answer named the object's frames begins as a write readers follow of the cache's own
    (followed_writes.py, its writer the upstream fetcher): the reads that waited follow it from then on, so that a
    getInParts gets each piece once it has come; the copy is adopted (or, under SEGMENT_FROM_BYTES, put) when whole.
C3. A fetch that fails answers the reads still waiting `notFound`, naming the upstream's reason.
C4. A put or adopt from a peer (a processor's result) is stored here, then uploaded (`UploadWork`). A large one (from
    HOLD_FROM_BYTES) is first *held* (`HoldWork`): the upstream records that this cache holds it and will upload it
    (held_results.py), and the put is answered ok once it did; the upload follows in the background. If the upstream
    records no holds (an older one, or its bound), or for a small one, the answer waits for the upload's, which it
    passes on (`full` and refusals included). Either way an object a processor was told is stored is held upstream
    or known there to be held here: a result whose host dies before its upload is stored is made again from its task.
    An object the fetcher stored is never uploaded.
C5. `exists` of an object asks the upstream (`Check`): the answer is the upstream's, and a copy of an object the
    upstream no longer holds is dropped here (a cleared object then fails as a missing one).
C6. A `writeBegin` from a peer is refused: readers of a result ask the storage server, which cannot follow a write
    on another host; the writer then puts the object whole.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

#: The identity under which the cache's own fetcher speaks to its service (no socket peer has an empty first byte
#: and this name: ROUTER identities that ZeroMQ makes start with a zero byte followed by four random bytes).
FETCHER = b"\x00scaler-host-cache-fetcher"

#: A result from this size on is held (C4): its put answered once the upstream recorded that this cache holds it, its
#: upload after (the size from which uploads take turns, upload_admission.py).
HOLD_FROM_BYTES = 1 << 20

C6_REFUSAL = "a host cache takes no writes readers follow: put or adopt the object (it is stored upstream too)"

R = TypeVar("R")  #: a waiting read, as the service remembers it
W = TypeVar("W", bound=Hashable)  #: a waiting put, adopt or exists, as the service remembers it


@dataclass(frozen=True, slots=True)
class Fetch:
    """Read the object from upstream into this cache (rule C1)."""

    object_id: bytes


@dataclass(frozen=True, slots=True)
class UploadWork:
    """Store the object upstream as it is stored here (rule C4): the shell takes its frames from the store."""

    object_id: bytes
    generation: int
    held: bool = False  #: the upstream recorded that this cache holds it (its upload may ask what is wanted of it)


@dataclass(frozen=True, slots=True)
class HoldWork:
    """Tell the upstream that this cache holds the object and will upload it (rule C4)."""

    object_id: bytes
    generation: int


@dataclass(frozen=True, slots=True)
class Check:
    """Ask the upstream whether it holds the object (rule C5)."""

    object_id: bytes


UpstreamWork = Fetch | HoldWork | UploadWork | Check


class CacheRole(Generic[R, W]):
    """The reads, puts and exists that wait on the upstream, and the work they call for (module docstring)."""

    def __init__(self) -> None:
        self._missing: dict[bytes, list[R]] = {}  #: object -> the reads waiting for its fetch to begin (C1)
        self._fetching: set[bytes] = set()  #: objects whose fetch is under way (C1, C2)
        self._uploading: dict[tuple[bytes, int], list[W]] = {}  #: (object, generation) -> its waiting puts (C4)
        self._holding: dict[tuple[bytes, int], list[W]] = {}  #: (object, generation) -> puts waiting for its hold (C4)
        #: large results are held (C4) until the upstream answers that it records no holds (an older one)
        self.holds = True
        self._checking: dict[bytes, list[W]] = {}  #: object -> the exists waiting for the upstream's answer (C5)
        self._work: list[UpstreamWork] = []

    def take_work(self) -> list[UpstreamWork]:
        work, self._work = self._work, []
        return work

    # ------------------------------------------------------------ C1-C3: fetches

    def miss(self, object_id: bytes, read: R) -> None:
        """C1: a read of an object neither held nor being fetched waits for its fetch."""
        self._missing.setdefault(object_id, []).append(read)
        if object_id not in self._fetching:
            self._fetching.add(object_id)
            self._work.append(Fetch(object_id))

    def is_fetching(self, object_id: bytes) -> bool:
        return object_id in self._fetching

    def fetch_began(self, object_id: bytes) -> list[R]:
        """C2: the reads that waited, to follow the fetch's write from now on."""
        return self._missing.pop(object_id, [])

    def fetch_ended(self, object_id: bytes) -> list[R]:
        """C2, C3: the fetch is over (its copy stored, or it failed): the reads still waiting for it, to answer as
        reads of what is stored now (nothing, after a failure: `notFound`)."""
        self._fetching.discard(object_id)
        return self._missing.pop(object_id, [])

    # ------------------------------------------------------------ C4: uploads

    def upload(self, object_id: bytes, generation: int, waiting: list[W], total_bytes: int = 0) -> None:
        """C4: a peer's put or adopt settled here; its answer waits for the hold of a large one, else for the upload."""
        key = (object_id, generation)
        if key in self._holding:
            self._holding[key].extend(waiting)
            return
        if self.holds and total_bytes >= HOLD_FROM_BYTES and key not in self._uploading:
            self._holding[key] = list(waiting)
            self._work.append(HoldWork(object_id, generation))
            return
        if key not in self._uploading:
            self._work.append(UploadWork(object_id, generation))
        self._uploading.setdefault(key, []).extend(waiting)

    def held(self, object_id: bytes, generation: int, recorded: bool) -> list[W]:
        """C4: the upstream answered a hold. Recorded: the puts to answer ok now, and the upload goes on without them;
        not: they wait for the upload instead (an upstream that records no holds is not asked again: `holds`)."""
        key = (object_id, generation)
        waiting = self._holding.pop(key, [])
        if key not in self._uploading:
            self._work.append(UploadWork(object_id, generation, recorded))
        if recorded:
            self._uploading.setdefault(key, [])
            return waiting
        self._uploading.setdefault(key, []).extend(waiting)
        return []

    def uploaded(self, object_id: bytes, generation: int) -> list[W]:
        """C4: the upstream answered the upload: the puts and adopts to answer with its status."""
        return self._uploading.pop((object_id, generation), [])

    # ------------------------------------------------------------ C5: exists

    def check(self, object_id: bytes, asker: W) -> None:
        """C5: an exists waits for the upstream's answer."""
        if object_id not in self._checking:
            self._work.append(Check(object_id))
        self._checking.setdefault(object_id, []).append(asker)

    def checked(self, object_id: bytes) -> list[W]:
        """C5: the upstream answered: the exists to answer with it."""
        return self._checking.pop(object_id, [])
