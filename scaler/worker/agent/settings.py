"""The worker agent core's settings (from the worker's `WorkerConfig` and its executor, `worker/process.py`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AgentSettings:
    scheduler_address: str = ""  #: for messages about the link
    slots: int = 1
    max_held_tasks: int = 1000  #: --per-worker-task-queue-size: bounds its hello's capacity
    heartbeat_interval_seconds: float = 2.0
    death_timeout_seconds: float = 300.0
    scheduler_lost_grace_seconds: float = 60.0  #: 0: only the death timeout ends a worker whose scheduler left
    task_timeout_seconds: float = 0.0  #: 0: no limit (the scheduler enforces it: its hello says it)
    object_storage_address: str = ""  #: override; empty: what the scheduler says
    #: the shell finds where processors reach storage (RouteStorage: the host's cache off the storage's host)
    route_storage: bool = False
    has_preload: bool = False
    #: a waiting parent keeps its processor (nested_parents "process"; its hello says so): the scheduler wants another
    processor_per_parent: bool = False
    #: tasks a processor may hold beyond the one it computes (`Executor.max_staged_tasks`); 0: none
    max_staged_tasks: int = 0
    #: a gap between two events longer than this is the worker's own pause (SIGSTOP, a VM paused by its host), which
    #: does not count as the scheduler's silence (`LinkSettings.pause_after_seconds`); None: every gap counts
    pause_after_seconds: float | None = None
    #: the worker leaves this long after `lifetime_started_at` (its process's start), draining
    #: `lifetime_drain_seconds` before (rule 6 of the core); 0: no lifetime
    lifetime_seconds: float = 0.0
    lifetime_drain_seconds: float = 0.0
    lifetime_started_at: float | None = None  #: monotonic seconds; None: the core's start
