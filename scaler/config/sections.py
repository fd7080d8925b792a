"""One frozen settings section per component. Field names are the long flags in snake case, which are
also the TOML keys; `scaler.config.loader` loads them from flags, environment and TOML.

Defaults follow the reference surface (docs/configuration.md lists where we chose otherwise).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, TypeVar

from scaler.config.fields import RetiredSetting, setting
from scaler.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from scaler.config.manager_sections import AWSHPCWorkerManagerConfig as AWSHPCWorkerManagerConfig
    from scaler.config.manager_sections import CloudUnitSettings as CloudUnitSettings
    from scaler.config.manager_sections import EC2WorkerManagerConfig as EC2WorkerManagerConfig
    from scaler.config.manager_sections import ECSWorkerManagerConfig as ECSWorkerManagerConfig
    from scaler.config.manager_sections import KubernetesWorkerManagerConfig as KubernetesWorkerManagerConfig
    from scaler.config.manager_sections import NativeWorkerManagerConfig as NativeWorkerManagerConfig
    from scaler.config.manager_sections import SlurmWorkerManagerConfig as SlurmWorkerManagerConfig
    from scaler.config.manager_sections import SymphonyWorkerManagerConfig as SymphonyWorkerManagerConfig
    from scaler.config.manager_sections import WorkerManagerSettings as WorkerManagerSettings

_S = TypeVar("_S")

#: The worker managers' sections, declared in `scaler.config.manager_sections` and named here too, imported when first
#: used: a process that manages no worker does not build them.
_MANAGER_SECTIONS = "scaler.config.manager_sections"
__getattr__ = lazy_exports(
    __name__,
    {
        name: _MANAGER_SECTIONS
        for name in (
            "WorkerManagerSettings",
            "NativeWorkerManagerConfig",
            "CloudUnitSettings",
            "ECSWorkerManagerConfig",
            "EC2WorkerManagerConfig",
            "KubernetesWorkerManagerConfig",
            "AWSHPCWorkerManagerConfig",
            "SymphonyWorkerManagerConfig",
            "SlurmWorkerManagerConfig",
        )
    },
    globals(),
)

LOGGING_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")
EVENT_LOOPS = ("builtin", "uvloop")


class NestedParents(Enum):
    """Where a task waiting on its nested tasks waits (`--nested-parents`; each value is how settings spell it)."""

    THREAD = "thread"  #: parked in its processor, which runs other tasks meanwhile
    PROCESS = "process"  #: in a processor of its own, which runs nothing else meanwhile

    @classmethod
    def named(cls, name: str) -> NestedParents:
        """The mode a setting names; a ValueError naming the allowed ones for any other name."""
        try:
            return cls(name.lower())
        except ValueError:
            allowed = ", ".join(mode.value for mode in cls)
            raise ValueError(f"nested_parents must be one of {allowed}, not {name!r}") from None


@dataclass(frozen=True, kw_only=True)
class LoggingSettings:
    logging_level: str = setting(
        "INFO", help="log level", short=("-ll",), choices=LOGGING_LEVELS, combo=True, combo_default="WARNING"
    )
    logging_paths: tuple[str, ...] = setting(
        ("/dev/stdout",), help="where logs go: /dev/stdout, /dev/stderr or file paths", short=("-lp",), combo=True
    )
    logging_config_file: str | None = setting(
        None,
        help="a Python logging .conf file; overrides the other logging settings",
        short=("-lcf", "-lc"),
        combo=True,
    )
    logging_format: str = setting(
        "text",
        help="text: one line per record for people; json: one JSON object per line (time, level, logger, "
        "component, message, and task_id/worker/client when a record has them)",
        choices=("text", "json"),
    )


@dataclass(frozen=True, kw_only=True)
class CurveClientSettings:
    """Keys of a side that connects (clients' tools, workers, managers): docs/security.md."""

    curve_secret_key: str | None = setting(
        None, help="this side's CURVE secret key file (NAME.key_secret, from scaler_keygen); secures every connection"
    )
    curve_server_key: str | None = setting(None, help="the servers' CURVE public key file (server.key)")


@dataclass(frozen=True, kw_only=True)
class CurveServerSettings:
    """Keys of a server (scheduler, object storage): docs/security.md. With none, the user's keys
    (`scaler.security.find`)."""

    curve_secret_key: str | None = setting(
        None, help="the servers' CURVE secret key file (server.key_secret, from scaler_keygen)"
    )
    curve_authorized_keys: str | None = setting(
        None, help="folder of the public keys (*.key) allowed to connect; re-read when it changes"
    )
    insecure: bool = setting(
        False,
        help="serve plain TCP without CURVE keys: anyone who can reach the ports can submit, read and forge "
        "(default: secure, with the user's keys from ~/.config/scaler/keys unless --curve-* settings are given)",
    )


@dataclass(frozen=True, kw_only=True)
class TlsClientSettings:
    """What a connecting side trusts at tls:// and wss:// addresses: docs/security.md."""

    tls_ca: str | None = setting(
        None,
        help="PEM bundle of the certificate authorities trusted at tls:// and wss:// addresses, besides the "
        "system's (or SSL_CERT_FILE's)",
        combo=True,
    )


@dataclass(frozen=True, kw_only=True)
class TlsServerSettings(TlsClientSettings):
    """The certificate a server presents at the tls:// and wss:// addresses it binds: docs/security.md."""

    tls_cert: str | None = setting(
        None,
        help="PEM certificate (with its chain) presented at the tls:// and wss:// addresses bound",
        short=("-tc",),
        combo=True,
    )
    tls_key: str | None = setting(
        None, help="the PEM private key of --tls-cert (unencrypted)", short=("-tk",), combo=True
    )


@dataclass(frozen=True, kw_only=True)
class ObjectStorageServerConfig(LoggingSettings, CurveServerSettings, TlsServerSettings):
    bind_address: str = setting(
        help="address to listen on, e.g. tcp://127.0.0.1:8517",
        positional=True,
        aliases=("object_storage_address",),  # the 1.x name (positional and TOML key)
    )
    identity: str = setting("ObjectStorageServer", help="name used in logs")
    max_memory: int | None = setting(
        None,
        help="memory the stored objects may take (e.g. 200MB, 4GiB); beyond it objects spill to --spill-directory, "
        "least recently used first, or puts are refused without one; default: half of the machine's memory "
        "or of the cgroup's limit",
        byte_size=True,
        gt=0,
    )
    spill_directory: str | None = setting(
        None,
        help="local directory where objects are written so that they can leave memory and survive a restart of "
        "the server; default: none (objects live in memory only)",
    )
    shared_memory_directory: str | None = setting(
        None,
        help="where objects held in memory are kept as files that the processes of this host map instead of "
        "receiving a copy each; default: /dev/shm, or the temporary directory (with a warning) when it has less "
        "free space than half of --max-memory",
    )


@dataclass(frozen=True, kw_only=True)
class SchedulerConfig(LoggingSettings, CurveServerSettings, TlsServerSettings):
    bind_address: str = setting(
        help="address clients, workers and managers connect to, e.g. tcp://127.0.0.1:8516",
        positional=True,
        aliases=("scheduler_address",),
    )
    object_storage_address: str | None = setting(
        None,
        help="object storage server to use; when omitted the scheduler starts one at its port + 1",
        short=("-osa",),
    )
    advertised_object_storage_address: str | None = setting(
        None, help="object storage address given to clients and workers (NAT, public IP)", short=("-aosa",)
    )
    object_storage_max_memory: int | None = setting(
        None,
        help="--max-memory of the object storage server the scheduler starts (e.g. 4GiB); default: half of the "
        "machine's memory or of the cgroup's limit",
        byte_size=True,
        gt=0,
    )
    object_storage_spill_directory: str | None = setting(
        None,
        help="--spill-directory of the object storage server the scheduler starts; default: none",
    )
    monitor_address: str | None = setting(
        None, help="where status snapshots are published (default: scheduler port + 2)", short=("-ma",)
    )
    tunnel_address: str | None = setting(
        None,
        help="a second way in for peers that can only use TLS or WebSocket (a laptop behind an HTTPS proxy), e.g. "
        "wss://0.0.0.0:443: the scheduler, its object storage and its monitor are served there too (at /, /storage "
        "and /monitor of a ws:// or wss:// address; at its port, +1 and +2 of a tls:// one), with --tls-cert and "
        "--tls-key; a client that connects there is told the object storage there",
        core=True,
        combo=True,
    )
    status_report_interval_seconds: float = setting(
        1.0,
        help="period of the status snapshots on the monitor address",
        short=("-sri",),
        gt=0,
        core="status_interval_seconds",
    )
    metrics_address: str | None = setting(
        None, help="HOST:PORT where the scheduler serves /metrics for Prometheus itself (default: not served)"
    )
    protected: bool = setting(
        True,
        help="refuse clients' requests to shut the cluster down (-p False allows them)",
        short=("-p",),
        core=True,
        combo=True,
    )
    ship_local_modules: bool = setting(
        False,
        help="tell the clients of this machine (in the scheduler's connection file) to send the functions of their "
        "working folder's modules by value, for workers that do not share this machine's files (AWS Batch, ECS, "
        "EC2, Symphony); `scaler FILE` sets it when the file has such a manager",
    )
    max_number_of_tasks_waiting: int = setting(
        -1,
        help="queued tasks allowed while no worker has room; -1 for no limit",
        short=("-mt",),
        ge=-1,
        core="max_tasks_waiting",
        combo=True,
    )
    client_timeout_seconds: float = setting(
        60,
        help="a client silent this long is away (its work waits for it for client_resume_seconds); without a resume "
        "window it is dropped and its tasks cancelled",
        short=("-ct",),
        gt=0,
        core=True,
        combo=True,
    )
    client_resume_seconds: float = setting(
        1800,
        help="how long a client's work waits for it once it is away (silent past client_timeout_seconds, or its "
        "connection lost: a laptop asleep, moved or offline): its tasks run on and their results wait for it; past "
        "this, counted from its last message, its tasks are cancelled and its objects deleted. A client may ask for "
        "less (Client(resume_seconds=...)); 0: no waiting",
        short=("-crs",),
        ge=0,
        core=True,
        combo=True,
    )
    link_heartbeat_timeout_seconds: float = setting(
        15,
        help="with CURVE, a client's connection whose ZeroMQ pings (sent every third of this) go unanswered this long "
        "is ended, so that a client back from a dead one (its machine asleep, its network cut or changed) is heard "
        "again on its next connection (Client(link_heartbeat_timeout_seconds=...) is the client's side of it); more "
        "than 5 s, since a connection that ends within 5 s of its client's last message is taken for a client whose "
        "process ended (it is dropped, not kept away)",
        gt=5,  # CRASH_SILENCE_SECONDS of scheduler/core/client_sessions.py
    )
    held_answers_memory_bytes: int = setting(
        1 << 20,
        help="results held for an away client are kept in the scheduler's memory up to this many bytes per client; "
        "beyond, they are written to object storage in bundles of this size (e.g. 4MiB)",
        ge=1,
        byte_size=True,
        core=True,
    )
    max_clients: int = setting(
        0, help="the most clients connected at once; one more is refused when it connects, with an error naming this "
        "limit (a client that leaves makes room; jobs outlive their clients and do not count); 0: no limit",
        ge=0, core=True, combo=True,
    )  # fmt: skip
    worker_timeout_seconds: float = setting(
        60,
        help="drop a worker silent this long (or three of its heartbeat periods, when longer) and re-dispatch its "
        "tasks",
        short=("-wt",),
        gt=0,
        core=True,
        combo=True,
    )
    worker_heartbeat_interval_seconds: float = setting(
        2,
        help="workers beat at their own period while they number at most 50 per second of this; beyond, the scheduler "
        "gives them a longer one (the worker count / 50 s), so that they send at most 50 heartbeats a second in all "
        "(a worker keeps its own period when longer)",
        short=("-whi",),
        gt=0,
        core="heartbeat_interval_seconds",
    )
    worker_manager_timeout_seconds: float = setting(
        10, help="forget a worker manager silent this long", short=("-wmt",), gt=0, core="manager_timeout_seconds"
    )
    object_retention_seconds: float = setting(
        60,
        help="keep the objects of a departed client this long before deleting them; 0: at once",
        short=("-ot",),
        ge=0,
        core=True,
        combo=True,
    )
    result_retention_seconds: float = setting(
        3600,
        help="keep a job's results (Client.map_job) this long after the job ended, then free them",
        short=("-rrt",),
        ge=0,
        core=True,
        combo=True,
    )
    job_result_quota_bytes: int = setting(
        0,
        help="the most bytes of results the jobs of one CURVE key (or one client without CURVE) keep at once; a "
        "result over it is refused with an error naming the quota; 0: no quota (sharing.toml may set one per key)",
        short=("-jrq",),
        ge=0,
        core=True,
    )
    max_task_retries: int = setting(
        3, help="times a task is re-dispatched after its worker died before it fails with WorkerDiedError",
        short=("-mtr",), ge=0, core=True, combo=True,
    )  # fmt: skip
    story_retention_tasks: int = setting(
        10_000, help="finished tasks whose story (future.story()) is kept, the oldest forgotten first; 0: no stories",
        ge=0, core=True, combo=True,
    )  # fmt: skip
    story_retention_seconds: float = setting(
        3600,
        help="how long a finished task's story is kept at most; 0: no time bound (only the count)",
        ge=0,
        core=True,
        combo=True,
    )
    load_balance_seconds: float = setting(
        1, help="period of load balancing; 0 or negative disables it", short=("-ls",), core=True, combo=True
    )
    unrunnable_grace_seconds: float = setting(
        60,
        help="queued tasks needing capabilities that no connected worker has and no worker manager declares fail "
        "with NoWorkerError naming them after this long (their clients are warned after 5 s); 0: they wait",
        ge=0,
        core=True,
        combo=True,
    )
    placement_link_mbit: float = setting(
        100,
        help="the rate assumed of the links between worker hosts, in Mbit/s: a task whose large inputs only a busy "
        "host holds waits for it while its expected wait is shorter than fetching them at this rate elsewhere; "
        "0: never waits",
        ge=0,
        core=True,
    )
    placement_max_wait_seconds: float = setting(
        5,
        help="the longest a task waits for a busy host that holds its large inputs (at most the fetch time it "
        "saves) before it goes to any free worker; 0: never waits",
        ge=0,
        core=True,
    )
    load_balance_trigger_times: int = setting(
        2,
        help="identical balance decisions in a row needed before tasks move",
        short=("-lbt",),
        gt=0,
        core=True,
        combo=True,
    )
    event_loop: str = setting(
        "builtin", help="asyncio loop flavour", short=("-el", "-e"), choices=EVENT_LOOPS, combo=True
    )
    io_threads: int = setting(
        1,
        help="ZeroMQ I/O threads",
        short=("-it", "-wit"),
        aliases=("worker_io_threads",),
        gt=0,
        combo="scheduler_io_threads",
    )
    policy_engine_type: str = setting(
        "simple", help="scaling policy engine", short=("-et",), choices=("simple", "waterfall_v1"), combo=True
    )
    policy_content: str = setting(
        "allocate=capability; scaling=vanilla",
        help="policy of the engine (`scaler --docs scaling` lists them)",
        short=("-pc",),
        combo=True,
        combo_default="allocate=capability; scaling=no",
    )


@dataclass(frozen=True, kw_only=True)
class WorkerSettings(LoggingSettings, CurveClientSettings, TlsClientSettings):
    """Flags every worker shares, whoever starts it (scaler_cluster, a worker manager, scaler_worker)."""

    object_storage_address: str | None = setting(
        None, help="object storage for the workers; default: what the scheduler advertises", short=("-osa",)
    )
    per_worker_capabilities: str = setting(
        "", help='capabilities each worker advertises, e.g. "linux,cpu=8"', short=("-pwc",)
    )
    per_worker_task_queue_size: int = setting(
        1000, help="most tasks a worker holds at once (running plus prefetched)", short=("-wtqs",), gt=0, combo=True
    )
    heartbeat_interval_seconds: float = setting(
        2, help="worker heartbeat period", short=("-his", "-hi"), aliases=("heartbeat_interval",), gt=0, combo=True
    )
    task_timeout_seconds: float = setting(
        0, help="stop a task running longer than this; 0 for no limit", short=("-tts",), ge=0, combo=True
    )
    death_timeout_seconds: float = setting(
        300, help="a worker without scheduler contact this long exits", short=("-dts", "-ds"), gt=0, combo=True
    )
    lifetime_seconds: float = setting(
        0, help="the worker leaves this long after its process started (a batch job's time limit, its script ending "
        "with an exec of the worker), draining first; 0: no limit", ge=0,
    )  # fmt: skip
    lifetime_drain_seconds: float = setting(
        60, help="with a lifetime: this long before it ends the worker takes no new task and gives back those it has "
        "not started; those it runs may finish until it ends, then run elsewhere at no retry cost", ge=0,
    )  # fmt: skip
    scheduler_lost_grace_seconds: float = setting(
        60,
        help="after its connection to the scheduler closes, how long a worker waits for a scheduler (a "
        "restarted one) to answer at the same address before it exits; 0: only the death timeout applies",
        ge=0,
    )
    storage_timeout_seconds: float = setting(
        60,
        help="how long the object storage may stay silent while a task's request (an argument's read, a result's "
        "write) waits before it fails naming the storage; a transfer that keeps moving is never cut",
        gt=0,
    )
    host_cache: bool = setting(
        True,
        help="on a host other than the object storage's, read objects through one cache process per host (started "
        "by the host's first worker, shared by all of them): the host fetches each object once and its processors "
        "map one copy; False: each processor reads its own copy from the storage server",
        combo=True,
    )
    garbage_collect_interval_seconds: float = setting(
        30, help="period of garbage collection in processors", short=("-gc",), gt=0, combo=True
    )
    trim_memory_threshold_bytes: int = setting(
        1 << 30,
        help="resident memory above which processors return freed memory to the OS; also the most freed C heap "
        "(64MiB at most) a processor keeps for its next task (e.g. 512MiB)",
        short=("-tm",),
        ge=0,
        byte_size=True,
        combo=True,
    )
    nested_parents: str = setting(
        "thread",
        help="where a task waiting on its nested tasks waits: 'thread' parks it in its processor, which runs other "
        "tasks meanwhile (no process per waiting parent; if that processor crashes or is stopped for another task, "
        "the parent runs again within the retry budget); 'process' keeps a processor per waiting parent",
        choices=tuple(mode.value for mode in NestedParents),
        combo=True,
    )
    io_threads: int = setting(
        1,
        help="ZeroMQ I/O threads per worker",
        short=("-it", "-wit"),
        aliases=("worker_io_threads",),
        gt=0,
        combo="worker_io_threads",
    )
    event_loop: str = setting(
        "builtin", help="asyncio loop flavour", short=("-el", "-e"), choices=EVENT_LOOPS, combo=True
    )
    preload: str | None = setting(
        None,
        help='"pkg.mod:func" or "pkg.mod:func(\'x\', debug=False)", run once per processor before any task',
        combo=True,
    )
    preimport: tuple[str, ...] = setting(
        (),
        help="modules the worker's zygote imports once, before it forks its processors, e.g. numpy sklearn.svm: "
        "every processor starts with them imported (their memory shared), so no task pays the import; a module that "
        "fails to import stops the worker; not for modules whose import starts threads (--preload those)",
        combo=True,
    )


@dataclass(frozen=True, kw_only=True)
class WorkerConfig(WorkerSettings):
    """One worker process (`scaler_worker`, and what pools and managers start)."""

    scheduler_address: str = setting(help="scheduler to connect to", positional=True)
    worker_manager_id: str = setting(
        "", help="manager this worker belongs to", short=("-wmi",), combo=True, combo_default="combo"
    )
    worker_type: str = setting("FIX", help="prefix of the worker id, e.g. FIX, NAT, ECS")


@dataclass(frozen=True, kw_only=True)
class ClusterConfig(WorkerSettings):
    """`scaler_cluster`: a fixed pool of local workers (section [cluster])."""

    scheduler_address: str = setting(help="scheduler the workers connect to", positional=True)
    num_of_workers: int = setting(
        max(1, (os.cpu_count() or 2) - 1),
        shown_default="CPU count - 1",
        help="number of workers",
        short=("-n", "-mtc"),
        aliases=("max_task_concurrency",),  # the 1.24 spelling
        gt=0,
    )
    worker_manager_id: str = setting("cluster", help="manager id the workers report", short=("-wmi",))
    worker_type: str = setting("FIX", help="prefix of the worker ids")


#: Why `direct_results` and `lend_processors` are retired.
_ONE_ROUTE = (
    "deprecated, it has no effect any more: every task reaches its processor on the processor's own link to the "
    "scheduler, and its result leaves there"
)

#: Settings of the reference that nothing here reads, by the name of the section that would have them (its subclasses
#: too; a name, so that the worker managers' sections need not be imported here): accepted from flags and TOML with a
#: note, never part of a section (`fields.RetiredSetting`).
RETIRED_SETTINGS: dict[str, tuple[RetiredSetting, ...]] = {
    "WorkerSettings": (
        RetiredSetting(
            "hard_processor_suspend",
            "a parent waiting on nested tasks always yields its slot, unsuspended",
            short=("-hps",),
            is_flag=True,
        ),
        RetiredSetting("direct_results", _ONE_ROUTE, is_flag=True, combo=True),
        RetiredSetting("lend_processors", _ONE_ROUTE, is_flag=True, combo=True),
    ),
    "EC2WorkerManagerConfig": (RetiredSetting("network_backend", "the workers always use ZeroMQ", values=("zmq",)),),
    "AWSHPCWorkerManagerConfig": (
        RetiredSetting("backend", "AWS Batch is the only backend", short=("-b",), values=("batch",)),
        RetiredSetting("name", "a proxy is named by its worker type, BAT-<unit id>", short=("-n",)),
    ),
}


def retired_settings(section_type: type) -> tuple[RetiredSetting, ...]:
    return tuple(retired for kind in section_type.__mro__ for retired in RETIRED_SETTINGS.get(kind.__name__, ()))


@dataclass(frozen=True, kw_only=True)
class StackSecurityConfig:
    """`[security]` of a `scaler FILE` stack: CURVE keys for every component it starts (docs/security.md)."""

    server_secret_key: str = setting(help="the servers' secret key file (scheduler and object storage)")
    server_public_key: str = setting(help="the servers' public key file, given to everything that connects")
    authorized_keys: str = setting(help="folder of the public keys allowed to connect")
    workers_secret_key: str = setting(help="the secret key file of the worker managers and the workers they start")


@dataclass(frozen=True, kw_only=True)
class LauncherConfig:
    """`[scaler]` of a `scaler FILE` stack: how the stack as a whole runs (docs/guide/bursting.md)."""

    hub: str = setting(
        "local", help="where the scheduler and object storage run: local (this machine) or cloud (a small unit of "
        "the first cloud worker manager's kind, started and stopped with the stack and reached from here through "
        "forwarders at the file's addresses: no inbound port on this machine, every connection CURVE-secured with "
        "keys the stack makes)", choices=("local", "cloud"),
    )  # fmt: skip
    hub_address: str | None = setting(
        None, help="with hub = cloud: where this machine reaches the hub, a wss:// (or tls://) address, e.g. "
        "wss://0.0.0.0:443 (0.0.0.0: the address the hub reports; a name: that name, which its certificate must "
        "name): the hub serves its scheduler, object storage and monitor there (at /, /storage and /monitor of a "
        "wss:// one; its port, +1 and +2 of a tls:// one) with [scheduler] tls_cert and tls_key, and the forwarder "
        "reaches it through the HTTP proxy https_proxy names, trusting [scheduler] tls_ca; default: the hub's tcp "
        "ports",
    )  # fmt: skip
    idle_shutdown_seconds: float = setting(
        0, help="stop the whole stack, cloud units included, after this long without a task queued or running; "
        "0: never", ge=0,
    )  # fmt: skip
    no_client_shutdown_seconds: float = setting(
        0, help="stop the whole stack, cloud units included, after this long without a connected client; 0: never",
        ge=0,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class TopConfig(CurveClientSettings, TlsClientSettings):
    """`scaler_top`: the terminal monitor (section [top]); it has no logging settings."""

    monitor_address: str = setting(help="the scheduler's monitor address, e.g. tcp://127.0.0.1:8518", positional=True)
    timeout: float = setting(5, help="seconds without a status report before the display says so", short=("-t",),
                             gt=0)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class GUIConfig(LoggingSettings, CurveClientSettings, TlsClientSettings):
    """`scaler_gui`: the web monitor (section [gui]; the 1.x [webui] section is read too)."""

    monitor_address: str = setting(help="the scheduler's monitor address, e.g. tcp://127.0.0.1:8518", positional=True)
    scheduler_address: str = setting(
        "", help="the scheduler's address, asked for a task's story on a click (default: the monitor port - 2)"
    )
    gui_address: str = setting(
        "127.0.0.1:50001", help="host:port the page is served on (0.0.0.0:PORT to reach it from other machines)"
    )
    broadcast_interval_seconds: float = setting(
        0.5, help="period of the updates pushed to the browsers", short=("-bi",), gt=0
    )
    task_log_max_size: int = setting(
        100_000, help="tasks the task log holds (past it the first finished go first)", short=("-tl",), gt=0
    )
    status_report_interval_seconds: float = setting(
        1, help="the scheduler's -sri; a scheduler silent for 5 periods is shown as stale", short=("-sri",), gt=0
    )


def section_to_json(section: object) -> str:
    """A section as JSON: how a process hands its children their settings (see `section_from_json`)."""
    import dataclasses
    import json

    return json.dumps(dataclasses.asdict(section))  # type: ignore[call-overload]


def section_from_json(section_type: type[_S], text: str) -> _S:
    import dataclasses
    import json

    values = json.loads(text)
    for field in dataclasses.fields(section_type):  # type: ignore[arg-type]
        if isinstance(values.get(field.name), list):
            values[field.name] = tuple(values[field.name])
    return section_type(**values)
