"""The settings `SchedulerClusterCombo` takes as keywords (`**settings: Unpack[ComboSettings]`).

Generated from the declarations (`combo=` in scaler/config/sections.py) by
`python -m scaler.config.reference`; do not edit. The defaults and the sections each keyword sets:
`scaler.config.combo`, docs/settings.md.
"""

from __future__ import annotations

from typing import TypedDict


class ComboSettings(TypedDict, total=False):
    logging_level: str  #: log level
    logging_paths: tuple[str, ...]  #: where logs go: /dev/stdout, /dev/stderr or file paths
    logging_config_file: str | None  #: a Python logging .conf file; overrides the other logging settings
    protected: bool  #: refuse clients' requests to shut the cluster down (-p False allows...
    max_number_of_tasks_waiting: int  #: queued tasks allowed while no worker has room; -1 for no limit
    client_timeout_seconds: float  #: drop a client silent this long and cancel its tasks
    max_clients: int  #: the most clients connected at once; one more is refused when it con...
    worker_timeout_seconds: float  #: drop a worker silent this long and re-dispatch its tasks
    object_retention_seconds: float  #: keep the objects of a departed client this long before deleting the...
    result_retention_seconds: float  #: keep a job's results (Client.map_job) this long after the job ended...
    max_task_retries: int  #: times a task is re-dispatched after its worker died before it fails...
    story_retention_tasks: int  #: finished tasks whose story (future.story()) is kept, the oldest for...
    story_retention_seconds: float  #: how long a finished task's story is kept at most; 0: no time bound...
    load_balance_seconds: float  #: period of load balancing; 0 or negative disables it
    unrunnable_grace_seconds: float  #: queued tasks needing capabilities that no connected worker has and...
    load_balance_trigger_times: int  #: identical balance decisions in a row needed before tasks move
    event_loop: str  #: asyncio loop flavour
    scheduler_io_threads: int  #: ZeroMQ I/O threads
    policy_engine_type: str  #: scaling policy engine
    policy_content: str  #: policy of the engine (`scaler --docs scaling` lists them)
    per_worker_task_queue_size: int  #: most tasks a worker holds at once (running plus prefetched)
    heartbeat_interval_seconds: float  #: worker heartbeat period
    task_timeout_seconds: float  #: stop a task running longer than this; 0 for no limit
    death_timeout_seconds: float  #: a worker without scheduler contact this long exits
    garbage_collect_interval_seconds: float  #: period of garbage collection in processors
    trim_memory_threshold_bytes: int  #: resident memory above which processors return freed memory to the O...
    nested_parents: str  #: where a task waiting on its nested tasks waits: 'thread' parks it i...
    direct_results: bool  #: processors send each result straight to the scheduler on a link of...
    worker_io_threads: int  #: ZeroMQ I/O threads per worker
    preload: str | None  #: "pkg.mod:func" or "pkg.mod:func('x', debug=False)", run once per pr...
    worker_manager_id: str  #: manager this worker belongs to
