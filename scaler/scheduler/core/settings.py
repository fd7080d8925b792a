"""What the scheduler core is configured with: `CoreSettings`, read by the core and every registry (through
`core_state.CoreState`), made once by the scheduler's process from its settings section."""

from __future__ import annotations

from dataclasses import dataclass

from scaler.policy.content import Allocation
from scaler.scheduler.core.story_book import DEFAULT_RETENTION_SECONDS, DEFAULT_RETENTION_TASKS

#: How long queued work nothing can run waits before it fails, when the cluster has workers or managers but none for
#: it (unserved_work.py, rule 3): long enough for a worker started by hand, or slowed by a loaded machine, to connect.
UNRUNNABLE_GRACE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class CoreSettings:
    scheduler_address: str
    object_storage_address: str  #: what clients and workers are told
    python_version: str  #: the scheduler's own; peers must share major.minor
    #: the scheduler's second way in (a tls://, ws:// or wss:// front), told to peers with the storage address: one
    #: that came through it reaches the object storage through it too
    tunnel_address: str | None = None
    protected: bool = False
    client_timeout_seconds: float = 60
    #: how long a client's work waits for it once it is away (silent past its timeout, or its connection lost);
    #: 0: it is dropped at once (client_sessions.py)
    client_resume_seconds: float = 0.0
    #: answers held for an away client beyond this many bytes go to object storage (client_answers.py, rule 4)
    held_answers_memory_bytes: int = 1 << 20
    max_clients: int = 0  #: the most clients registered at once; 0: no limit (registration.py)
    worker_timeout_seconds: float = 60
    manager_timeout_seconds: float = 10
    max_task_retries: int = 3
    max_tasks_waiting: int = -1
    status_interval_seconds: float = 1
    heartbeat_interval_seconds: float = 2
    allocate: Allocation = Allocation.CAPABILITY  #: how the dispatcher places tasks (EVEN_LOAD: capabilities ignored)
    load_balance_seconds: float = 1.0  #: <= 0 disables balancing
    load_balance_trigger_times: int = 2
    object_retention_seconds: float = 0.0  #: a departed client's objects are deleted this long after it left
    result_retention_seconds: float = 3600.0  #: a job's results are kept this long after it ended (core/jobs.py)
    job_result_quota_bytes: int = 0  #: the most bytes of results one owner's jobs keep (0: none; core/jobs.py)
    instance_id: bytes = b""  #: this scheduler process (drawn at start); peers tell a restart by it
    story_retention_tasks: int = DEFAULT_RETENTION_TASKS  #: finished tasks whose story is kept (0: no stories)
    story_retention_seconds: float = DEFAULT_RETENTION_SECONDS  #: and for how long (<= 0: no time bound)
    #: queued work nothing can run (its clients are told after unserved_work.WARN_SECONDS) fails after this long
    #: when the cluster has workers or managers, none for it (<= 0: never; core/unserved_work.py)
    unrunnable_grace_seconds: float = UNRUNNABLE_GRACE_SECONDS
    #: the link rate assumed between worker hosts, and the longest a task waits for a busy host holding its large
    #: inputs rather than fetch them elsewhere (data_waits.py); either 0: it never waits
    placement_link_mbit: float = 100.0
    placement_max_wait_seconds: float = 5.0
