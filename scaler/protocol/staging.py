"""The times of staging tasks in processors, shared by the scheduler (which stages them on each processor's link:
scheduler/core/peers.py, scheduler/core/processor_links.py) and the processors (which hold their results to leave
together: worker/processor/outlet.py).

How long a task staged in a processor may wait there behind one that computes: a task of a worker whose tasks were
tiny until now that computes this long is not tiny, and what is staged behind it is taken back, so that another
processor or another worker runs it instead of its waiting for the long one to end.

How long a processor holds the results of tasks it runs back to back so that they leave in one message, and, from
it, how much work the scheduler stages in a processor: the results held are credit the scheduler does not know is free
yet, so a processor holds more than a hold's worth of work, or it would run dry while its results wait."""

from __future__ import annotations

#: Seconds a processor's computing task may compute before the tasks staged behind it are taken back (and nothing
#: more is staged behind it).
STAGED_WAIT_SECONDS = 1.0

#: How long a processor may hold the results of tasks it runs back to back (the first held waits at most this long),
#: so that they leave on its link in one message: one send for the processor, one read and one step for the
#: scheduler, and the scheduler's answers (the client's results, the next tasks) in one message each as well. A
#: result is not held when the next one would come after the hold's end (outlet.ProcessorOutlet.result).
RESULT_HOLD_SECONDS = 0.010
#: Work the scheduler stages in a processor behind the task it computes, in seconds of their measured run time
#: (peers.WorkerRecord.learn): a hold's worth, which the scheduler learns of only when the hold ends, and as much again
#: to cover the round trip that brings the next tasks.
STAGING_SECONDS = 2 * RESULT_HOLD_SECONDS
