"""SchedulerClusterCombo: object storage, a scheduler and a fixed pool of workers on this machine.

All processes start at once (ZeroMQ connections wait for their peer), and the constructor returns
when the scheduler answers. `shutdown()` (or leaving a `with` block) stops workers, then the
scheduler, then object storage, and leaves no process behind.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import select
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from scaler.client.client import trust_security_config
from scaler.client.display import cluster_rows, html_table
from scaler.cluster.host import ForkedHost, fork_host, import_runtime, os_thread_count
from scaler.cluster.readiness import wait_for_scheduler
from scaler.config.combo import combo_signature, sections_of
from scaler.config.event_loops import event_loop_problem
from scaler.config.sections import ObjectStorageServerConfig, SchedulerConfig, WorkerConfig, section_to_json
from scaler.io.address import free_tcp_port_block, parse_address, parse_http_address
from scaler.io.child_processes import describe_exit, start_python_child, stop_children
from scaler.io.port_owner import address_in_use_problem
from scaler.io.tunnel.tls import trust_ca_file
from scaler.monitor import local_schedulers
from scaler.security.connection_files import MONITOR_SERVICE, SCHEDULER_SERVICE, STORAGE_SERVICE
from scaler.security.curve import security_of
from scaler.security.find import ServedAddresses, ServerKeys
from scaler.security.key_folder import ClusterKeys, user_keys

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from scaler.config.combo_settings import ComboSettings

logger = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 60.0


class SchedulerClusterCombo:
    def __init__(
        self,
        n_workers: int = 4,
        address: str | None = None,
        object_storage_address: str | None = None,
        monitor_address: str | None = None,
        per_worker_capabilities: dict[str, int] | None = None,
        *,
        hard_processor_suspend: bool = False,
        scaler_policy: Any = None,
        security_config: Any = None,
        secure: bool = False,
        insecure: bool = False,
        dashboard: bool | str = False,
        worker_capabilities: Sequence[dict[str, int]] | None = None,
        **settings: Unpack[ComboSettings],
    ) -> None:
        """Every connection is authenticated and encrypted with CURVE: by default with the user's keys
        (`~/.config/scaler/keys`, which `Client(cluster.get_address())` finds by itself); `secure=True`: with keys
        made for this cluster (deleted when it stops; `Client(cluster.get_address(), **cluster.client_keys)`);
        `insecure=True`: plain TCP, with a warning (anyone who can reach the ports can submit, read and forge).
        `dashboard=True` serves the web dashboard (and its `/metrics`) from this process on a free port of
        127.0.0.1; `dashboard="HOST:PORT"` on that address; `cluster.dashboard_link` is its address, which
        `repr`, the notebook display and the display of a `Client` of this cluster show.
        `worker_capabilities`: each worker's own capabilities, one dict per worker (their number is the number of
        workers), in the place of `per_worker_capabilities` (the same for all).
        `scaler_policy`: a `PolicyConfig` (`scaler.config.section.scheduler`), instead of `policy_engine_type` and
        `policy_content`. `hard_processor_suspend` is accepted for the reference's callers and ignored: a waiting
        parent always yields its slot, unsuspended.

        Every other keyword is a setting of the scheduler, the workers or object storage, with the meaning,
        type and default of its flag (`ComboSettings`, docs/settings.md): `client_timeout_seconds=5`,
        `nested_parents="process"` (a processor per waiting parent; "thread", the default, parks a task waiting
        on nested tasks in its processor, which runs other tasks meanwhile), `scheduler_io_threads`,
        `worker_io_threads`, `logging_level` ("WARNING" here), `policy_content` ("allocate=capability;
        scaling=no" here: tasks go only to workers with the capabilities they ask for, and the pool is fixed), ..."""
        settings = _with_security_config(settings, security_config)
        if isinstance(dashboard, str):  # a bad one is refused before anything starts
            parse_http_address(dashboard, "dashboard", "127.0.0.1:50001")
        if isinstance(n_workers, str):  # SchedulerClusterCombo("tcp://...", ...) as some older code does
            n_workers, address = 4 if address is None else int(address), n_workers
        if address is None:
            base = free_tcp_port_block(3)
            address = f"tcp://127.0.0.1:{base}"
        scheduler_address = parse_address(address)
        if object_storage_address is None:
            object_storage_address = str(scheduler_address.with_port_offset(1))
        self._address = str(scheduler_address)
        self._object_storage_address = object_storage_address
        self._monitor_address = monitor_address or str(scheduler_address.with_port_offset(2))
        declared = sections_of(_with_policy(dict(settings), scaler_policy))  # TypeError for an unknown keyword
        scheduler = SchedulerConfig(
            bind_address=self._address,
            object_storage_address=object_storage_address,
            monitor_address=self._monitor_address,
            **declared[SchedulerConfig],
        )
        worker = WorkerConfig(
            scheduler_address=self._address,
            worker_type="FIX",
            per_worker_capabilities=_capabilities_setting(per_worker_capabilities or {}),
            **declared[WorkerConfig],
        )
        # its workers' heartbeat period is the least the scheduler gives them (more with many workers)
        scheduler = dataclasses.replace(scheduler, worker_heartbeat_interval_seconds=worker.heartbeat_interval_seconds)
        storage = ObjectStorageServerConfig(bind_address=object_storage_address, **declared[ObjectStorageServerConfig])
        problem = event_loop_problem(scheduler) or event_loop_problem(worker)
        if problem is not None:  # else every process would fail at start, and the combo wait for the scheduler
            raise ValueError(f"SchedulerClusterCombo: {problem}")
        for bound in (self._address, object_storage_address, self._monitor_address):
            problem = address_in_use_problem(bound)
            if problem is not None:  # else a cluster already there would answer our readiness probe
                raise OSError(errno.EADDRINUSE, f"SchedulerClusterCombo: {problem}")
        server_keys = self._choose_keys(secure, insecure)  # after the refusals above: secure=True makes keys
        # insecure: say so for these addresses before the workers start (they would take the user's keys while
        # the scheduler has not registered yet); the servers then register the same, for as long as they run
        self._insecure_files = ServedAddresses(
            ServerKeys(None, insecure=insecure),
            {
                SCHEDULER_SERVICE: self._address,
                STORAGE_SERVICE: object_storage_address,
                MONITOR_SERVICE: self._monitor_address,
            },
        )
        self._insecure_files.register()
        # the servers without key settings use the user's keys themselves (and register connection files)
        scheduler = dataclasses.replace(scheduler, **server_keys)
        storage = dataclasses.replace(storage, **server_keys)
        worker = dataclasses.replace(worker, **self._worker_keys())
        plan = {
            "object_storage_server": section_to_json(storage),
            "scheduler": section_to_json(scheduler),
            "worker": section_to_json(worker),
            **_workers_plan(n_workers, worker_capabilities),
        }
        n_workers = plan["n_workers"]
        self._host: subprocess.Popen[bytes] | ForkedHost | None = None
        self._pids: dict[str, Any] = {}
        self._stopped = False
        report_read, report_write = os.pipe()
        try:
            if os_thread_count() == 1:
                self._host = fork_host(plan, report_write)
            else:
                self._host = start_python_child(
                    ["scaler.cluster.host", json.dumps(plan), str(report_write)], pass_fds=[report_write]
                )
            os.close(report_write)
            report_write = -1
            self._pids = _read_report(report_read, self._host)
            probe_security = security_of(self.client_keys)
            wait_for_scheduler(self._address, START_TIMEOUT_SECONDS, [self._host], security=probe_security)
        except BaseException:
            self.shutdown()
            raise
        finally:
            os.close(report_read)
            if report_write >= 0:
                os.close(report_write)
        self._dashboard: Any = None
        if dashboard:
            self._start_dashboard("127.0.0.1:0" if dashboard is True else str(dashboard))
        logger.info("local cluster at %s with %d workers", self._address, n_workers)
        local_schedulers.note_started(self, self._address, self._monitor_address)

    def _start_dashboard(self, gui_address: str) -> None:
        """The dashboard's server and feed reader are threads of this process (started after the cluster's host
        was forked, so the fork saw one thread)."""
        import threading

        from scaler.client.display import DASHBOARD_LINKS
        from scaler.config.sections import GUIConfig
        from scaler.monitor.dashboard import Dashboard

        try:
            keys = self.client_keys
            config = GUIConfig(
                monitor_address=self._monitor_address,
                scheduler_address=self._address,
                gui_address=gui_address,
                curve_secret_key=keys.get("curve_secret_key"),
                curve_server_key=keys.get("curve_server_key"),
            )
            self._dashboard = Dashboard(config)
        except BaseException:
            self.shutdown()
            raise
        threading.Thread(target=self._dashboard.serve, name="scaler-dashboard", daemon=True).start()
        DASHBOARD_LINKS[self._address] = self._dashboard.url
        logger.info("dashboard at %s", self._dashboard.url)

    @property
    def dashboard_link(self) -> str | None:
        """The web dashboard's address (`http://127.0.0.1:PORT/`) when started with `dashboard=`, else None."""
        dashboard = getattr(self, "_dashboard", None)
        return None if dashboard is None else str(dashboard.url)

    def get_address(self) -> str:
        return self._address

    @property
    def client_keys(self) -> dict[str, str]:
        """`Client(cluster.get_address(), **cluster.client_keys)`: empty for a cluster with `insecure=True`."""
        if self._keys is not None:
            return self._keys.client_settings()
        return self._user_keys.connecting_settings("client") if self._user_keys is not None else {}

    def _choose_keys(self, secure: bool, insecure: bool) -> dict[str, Any]:
        """Make or find the cluster's keys; the servers' key settings (none: the user's keys, by themselves)."""
        if secure and insecure:
            raise ValueError("SchedulerClusterCombo: secure=True and insecure=True contradict each other")
        self._keys = ClusterKeys.make() if secure else None
        self._user_keys = user_keys() if not secure and not insecure else None
        if insecure:
            return {"insecure": True}  # the servers log the warning
        return self._keys.server_settings() if self._keys is not None else {}

    def _worker_keys(self) -> dict[str, Any]:
        if self._keys is not None:
            return self._keys.worker_settings()
        return self._user_keys.connecting_settings("worker") if self._user_keys is not None else {}

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return (
            f"SchedulerClusterCombo(address={self._address!r}, workers={len(self.worker_pids)}, "
            f"monitor={self._monitor_address!r}, "
            + (f"dashboard={self.dashboard_link!r}, " if self.dashboard_link else "")
            + f"{state})"
        )

    def _repr_html_(self) -> str:
        rows = cluster_rows(
            self._address, self._object_storage_address, self._monitor_address, len(self.worker_pids),
            not self._stopped, self.dashboard_link,
        )  # fmt: skip
        return html_table("scaler SchedulerClusterCombo", rows)

    @property
    def object_storage_address(self) -> str:
        return self._object_storage_address

    @property
    def monitor_address(self) -> str:
        return self._monitor_address

    def processes(self) -> list[Any]:
        """The cluster's process (its host; object storage, scheduler and workers are its children)."""
        return [self._host] if self._host is not None else []

    @property
    def scheduler_pid(self) -> int:
        return int(self._pids["scheduler"])

    @property
    def object_storage_pid(self) -> int:
        return int(self._pids["object_storage_server"])

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the worker agents (each forks a zygote, which forks the processors)."""
        return [int(pid) for pid in self._pids.get("workers", [])]

    def shutdown(self) -> None:
        """Stop workers, then the scheduler, then object storage; no process is left behind."""
        if self._stopped:
            return
        self._stopped = True
        local_schedulers.note_stopped(self)
        dashboard, self._dashboard = getattr(self, "_dashboard", None), None
        if dashboard is not None:
            from scaler.client.display import DASHBOARD_LINKS

            DASHBOARD_LINKS.pop(self._address, None)
            dashboard.stop()
        keys, self._keys = self._keys, None
        if self._host is not None:
            stop_children([self._host], grace_seconds=20.0)
        insecure_files = getattr(self, "_insecure_files", None)
        if insecure_files is not None:
            insecure_files.unregister()
        if keys is not None:
            keys.remove()

    def __enter__(self) -> SchedulerClusterCombo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:
            pass


# `help(SchedulerClusterCombo)` and notebooks show every declared keyword, not `**settings`
SchedulerClusterCombo.__init__.__signature__ = combo_signature(SchedulerClusterCombo.__init__)  # type: ignore[attr-defined]


def _with_policy(settings: dict[str, Any], scaler_policy: Any) -> dict[str, Any]:
    """The keywords with those of a `PolicyConfig` given as `scaler_policy=` (it wins, as it always did)."""
    if scaler_policy is not None:
        for name in ("policy_engine_type", "policy_content"):
            if hasattr(scaler_policy, name):
                settings[name] = getattr(scaler_policy, name)
    return settings


def _with_security_config(settings: ComboSettings, security_config: Any) -> ComboSettings:
    """The settings with the reference's `SecurityConfig(tls_cert, tls_key)` as the servers' certificate (the
    tls_cert and tls_key keywords win), and the certificate authorities of `tls_ca` (or of that certificate) trusted
    by this process: it probes its servers, and its clients connect."""
    trust_security_config(security_config)
    if settings.get("tls_ca"):
        trust_ca_file(str(settings["tls_ca"]))
    if security_config is None:
        return settings
    given = {
        "tls_cert": getattr(security_config, "tls_cert", None),
        "tls_key": getattr(security_config, "tls_key", None),
    }
    return cast("ComboSettings", {**{key: value for key, value in given.items() if value}, **settings})


def _workers_plan(n_workers: int, worker_capabilities: Sequence[dict[str, int]] | None) -> dict[str, Any]:
    """How many workers the host starts, and each one's capabilities when they are their own."""
    if worker_capabilities is None:
        return {"n_workers": n_workers}
    return {
        "n_workers": len(worker_capabilities),
        "worker_capabilities": [_capabilities_setting(each) for each in worker_capabilities],
    }


def _capabilities_setting(capabilities: dict[str, int]) -> str:
    """`{"linux": -1, "cpu": 8}` as the workers' setting: "linux,cpu=8"."""
    return ",".join(name if value == -1 else f"{name}={value}" for name, value in capabilities.items())


def _read_report(fd: int, host: Any) -> dict[str, Any]:
    """The pids the host reports once it has forked the cluster's processes."""
    data = b""
    while not data.endswith(b"\n"):
        readable, _, _ = select.select([fd], [], [], START_TIMEOUT_SECONDS)
        if not readable:
            raise RuntimeError(f"the cluster host did not start within {START_TIMEOUT_SECONDS:g} s")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise RuntimeError(f"the cluster host exited during start-up ({describe_exit(host.wait())})")
        data += chunk
    return dict(json.loads(data))


# A local cluster forks its processes from this one when it can (see scaler.cluster.host): importing
# this module imports what they run.
import_runtime()
