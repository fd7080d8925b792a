"""How long a task staged in a processor may wait there behind one that computes (one constant, for both sides that
stage tasks in processors): the worker agent, for the tasks it stages (worker/agent/placement.py, agent/core.py rule
7), and the scheduler, for the tasks it sends on a lent processor's link (scheduler/core/worker_sessions.py). A task
of a function that was tiny until now that computes this long is not tiny: what is staged behind it is taken back,
so that another processor or another worker runs it instead of its waiting for the long one to end."""

from __future__ import annotations

#: Seconds a processor's computing task may compute before the tasks staged behind it are taken back (and nothing
#: more is staged behind it).
STAGED_WAIT_SECONDS = 1.0
