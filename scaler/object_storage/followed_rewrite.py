"""What the writer of a followed write does after each attempt (pure): the writer's side of a storage restart.

A processor announces a large result once its write has begun (followed_put.py), so its client may hold a finished
future whose object is not stored yet. The writer keeps its own copy of the frames (the read-only buffers the task
returned) until the object is stored, and each attempt at writing it ends in one `Step`:

    STORED       the adopt was answered ok: the object is stored (the copy may go)
    REFUSED      the server this write began with answered no: it ended the write (a delete of the object or of its
                 owner's objects, a stall), refused the adopt, or is full. Its readers were told why by the server.
    LOST         a request failed and a server accepted this writer's hello again since the attempt began: the server
                 restarted (or the connection was replaced) and does not know the write any more
    FILE_FAILED  the segment file could not be written here (the tmpfs is full): the server is told, and tells its
                 readers

and the table `AFTER` says what comes next. A LOST write is written again whole, from the writer's copy, to the server
there now (`REWRITE`: a new file, writeBegin of the same object, its payload, its adopt), at most MAX_REWRITES times;
its readers wait for it meanwhile (followed_writes rules 5 and 6). The processor reports its writes done
(ProcessorWriting false) only once every attempt is over. A delete that ends a write is not undone: a REFUSED write is
never written again (a delete during the write wins, as a delete after it would).
"""

from __future__ import annotations

import enum


class Step(enum.Enum):
    """How one attempt at a followed write ended (module docstring)."""

    STORED = "stored"
    REFUSED = "refused"
    LOST = "lost"
    FILE_FAILED = "file failed"


class Next(enum.Enum):
    """What the writer does after an attempt."""

    DONE = "done"  #: stored
    GIVE_UP = "give up"  #: its readers were told by the server (or the server is gone for good)
    TELL_AND_GIVE_UP = "tell and give up"  #: tell the server the write failed (writeProgress.failed), then stop
    REWRITE = "rewrite"  #: write the whole object again, from the writer's copy, to the server there now


#: Writes again after a lost one, at most (a server that keeps restarting mid-write is not followed forever).
MAX_REWRITES = 3

#: (how the attempt ended, a rewrite is left) -> what comes next: the writer's transitions, all of them.
AFTER: dict[tuple[Step, bool], Next] = {
    (Step.STORED, True): Next.DONE,
    (Step.STORED, False): Next.DONE,
    (Step.REFUSED, True): Next.GIVE_UP,
    (Step.REFUSED, False): Next.GIVE_UP,
    (Step.FILE_FAILED, True): Next.TELL_AND_GIVE_UP,
    (Step.FILE_FAILED, False): Next.TELL_AND_GIVE_UP,
    (Step.LOST, True): Next.REWRITE,
    (Step.LOST, False): Next.GIVE_UP,
}


def failed_step(greeted_again: bool) -> Step:
    """A request of the attempt failed: LOST when a server accepted the writer's hello again since the attempt began
    (the one the write began with is gone), else REFUSED (that server's own answer, or no answer from it)."""
    return Step.LOST if greeted_again else Step.REFUSED


def after(step: Step, rewrites_done: int) -> Next:
    """What comes after an attempt that ended in `step`, `rewrites_done` rewrites so far."""
    return AFTER[(step, rewrites_done < MAX_REWRITES)]
