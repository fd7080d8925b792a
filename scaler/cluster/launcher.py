"""`scaler FILE`: start object storage, the scheduler and every worker manager of one TOML file.

Start order: object storage and the scheduler side by side (each said once it answers, the storage first; the
scheduler waits for its storage itself), then each [[worker_manager]] in file order, each said (`scaler: worker
manager ...`) once it has registered with the scheduler (seen on the monitor feed), so that a script waiting for the
line can use the stack; one that exits first stops the start-up, naming it. A file whose [scheduler] names an
object storage address of this machine where nothing listens, and that has no [object_storage_server], gets one
started there (`implied_storage`). With `[scaler] hub = "cloud"`, object storage and the scheduler run in a hub
unit in the cloud instead, reached through a forwarder at the file's addresses (`cloud_stack`); with
`idle_shutdown_seconds` or `no_client_shutdown_seconds`, the stack stops by itself (`autostop`).

The launcher then watches its children: a scheduler that exits unexpectedly
is started again (up to 5 times, after 1, 2, 4 ... s; clients, workers and managers re-attach to it); any
other child that exits unexpectedly stops the rest and the launcher exits non-zero. SIGINT/SIGTERM stop
everything in reverse start order with one shared grace period, then kill whatever is left, descendants
included (the workers managers started), so no process outlives the launcher. A second SIGINT (or SIGTERM), before
the stop or during it, means "stop now": what still runs is killed at once, said in one line.

The children run in a process group of their own: a Ctrl-C in the launcher's terminal reaches the launcher alone,
which stops them in order (each child stopping by itself at the same moment raced the launcher's stop, and a child
still importing printed a KeyboardInterrupt traceback). A signal during the start-up ends the waits at once and is a
stop like any other (exit code 0). A descendant is waited for within the grace, and is a leftover, killed and named,
only when it outlived it.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import FrameType

from scaler.cluster.autostop import AutoStop
from scaler.cluster.child_stop import stop_in_order
from scaler.cluster.cloud_stack import CloudStack
from scaler.cluster.implied_storage import with_implied_storage
from scaler.cluster.readiness import wait_for_scheduler
from scaler.cluster.stack_security import secured_by_default
from scaler.config.loader import LauncherFile
from scaler.config.manager_types import manager_type_of
from scaler.config.sections import GUIConfig, SchedulerConfig, WorkerManagerSettings, section_to_json
from scaler.io.address import parse_address
from scaler.io.child_processes import describe_exit, start_python_child
from scaler.io.port_owner import address_in_use_problem
from scaler.io.sockets import TransportSecurity
from scaler.monitor.dashboard import page_urls
from scaler.monitor.feed import FeedConnectionError, FeedReader
from scaler.object_storage.readiness import wait_for_object_storage
from scaler.protocol import messages as m
from scaler.protocol.exit_codes import ExitCode
from scaler.protocol.feed import STATUS_TOPIC
from scaler.security.curve import security_of
from scaler.security.tls_settings import trust_settings
from scaler.worker_manager.registry import with_manager_id

logger = logging.getLogger(__name__)

READY_TIMEOUT_SECONDS = 30.0
STOP_GRACE_SECONDS = 10.0
POLL_SECONDS = 0.2
#: A scheduler that dies is started again this many times (after 1, 2, 4 ... s), then the stack stops.
SCHEDULER_RESTARTS = 5
RESTART_BACKOFF_CAP_SECONDS = 8.0
#: While a worker manager has not registered yet, the launcher's log says so this often.
MANAGER_NOTICE_SECONDS = 10.0


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    module_args: list[str] = field(default_factory=list)  #: how it was started, to start it again
    restarts: int = 0


class Launcher:
    def __init__(self, file: LauncherFile, grace_seconds: float = STOP_GRACE_SECONDS, path: str = "scaler.toml"):
        self._file = file
        self._path = path  #: the file's path: names the stack's keys (hub = "cloud")
        self._grace_seconds = grace_seconds
        self._children: list[Child] = []
        self._signals: list[int] = []
        self._cloud: CloudStack | None = None
        self._feed: FeedReader | None = None
        self._feed_source: tuple[str, TransportSecurity | None] | None = None  #: the feed's address and keys
        self._autostop = AutoStop(
            file.launcher.idle_shutdown_seconds, file.launcher.no_client_shutdown_seconds, time.monotonic()
        )

    def run(self) -> int:
        """Start the stack, watch it, stop it; the exit code (1 also when the hub in the cloud could not be stopped,
        even after a clean run: something may be left running and billed)."""
        previous = {signum: signal.signal(signum, self._on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            code = self._start_and_watch()
        finally:
            if self._feed is not None:
                self._feed.close()
            if self._cloud is not None:  # the managers stop their units through the cloud's API, not through it
                self._cloud.stop_forwarder()
            self._stop_all()
            hub_stopped = True
            if self._cloud is not None:  # after the managers: they stopped their units through the hub
                hub_stopped = self._cloud.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if not hub_stopped:
            print("scaler: the hub in the cloud could not be stopped (the log says why); `scaler FILE --down` stops "
                  "what is left", flush=True)  # fmt: skip
            return ExitCode.ERROR
        return code

    def _start_and_watch(self) -> int:
        try:
            self._start_all()
        except _Interrupted as stop:
            logger.info("received %s during start-up: stopping", stop)
            return ExitCode.OK
        except (RuntimeError, ValueError, OSError) as error:
            logger.error("start-up failed: %s", error)
            return ExitCode.ERROR
        return self._watch()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals.append(signum)
        if len(self._signals) > 1:
            self._grace_seconds = 0.0

    # ------------------------------------------------------------ start

    def _start_all(self) -> None:
        file = self._file
        for section in (file.scheduler, file.object_storage_server):
            trust_settings(section)  # this process probes its servers, and their tls_ca names whom they trust
        monitor_security: TransportSecurity | None = None
        if file.launcher.hub == "cloud":
            self._cloud = CloudStack(file, self._path)
            file = self._cloud.start(lambda: bool(self._signals))
            monitor_security = self._cloud.client_security
        else:
            file, implied = with_implied_storage(file)
            if implied is not None:
                print(f"scaler: {implied}", flush=True)
            taken = taken_port_problem(file)
            if taken is not None:  # else a server already there would answer the readiness probe of ours
                raise RuntimeError(taken)
        file, probe_keys = secured_by_default(file)
        probe = security_of(probe_keys) if probe_keys is not None else None  # connects as the stack's managers do
        monitor = self._start_servers(file, probe)
        if monitor is not None:
            self._watch_feed(str(parse_address(monitor).connectable()), probe)
        dashboard = None
        if file.gui is not None:
            self._check_signals()
            dashboard = self._start("dashboard", ["scaler.monitor.dashboard", section_to_json(file.gui)])
        managers: list[tuple[WorkerManagerSettings, Child]] = []
        for manager in file.worker_managers:  # while the dashboard starts: neither needs the other
            self._check_signals()
            type_name = manager_type_of(manager).name
            child = self._start(
                f"worker manager {manager.worker_manager_id!r} ({type_name})",
                ["scaler.worker_manager.process", type_name, section_to_json(manager)],
            )
            managers.append((manager, child))
        if file.gui is not None and dashboard is not None:
            self._wait_for_dashboard(file.gui, dashboard)
        feed: tuple[str, TransportSecurity | None] | None = None
        if monitor is not None and managers:
            feed = str(parse_address(monitor).connectable()), probe
        elif self._cloud is not None and managers:
            feed = self._cloud.monitor_address, monitor_security
        self._announce_managers(managers, feed)
        if self._cloud is not None:
            self._watch_feed(self._cloud.monitor_address, monitor_security)
        launcher = self._file.launcher  # the idle and no-client clocks start once the stack is up
        self._autostop = AutoStop(launcher.idle_shutdown_seconds, launcher.no_client_shutdown_seconds, time.monotonic())

    def _wait_for_dashboard(self, gui: GUIConfig, child: Child) -> None:
        """Say the dashboard once its page answers (RuntimeError when it exits first or does not answer)."""
        host, _, port = gui.gui_address.rpartition(":")
        urls = page_urls(host, int(port))
        _wait_for_page(urls[0], READY_TIMEOUT_SECONDS, child.process, self._check_signals)
        others = f"; from other machines: {', '.join(urls[1:])}" if urls[1:] else ""
        print(f"scaler: dashboard at {urls[0]} (pid {child.process.pid}){others}; "
              f"scaler_top {gui.monitor_address} in a terminal", flush=True)  # fmt: skip

    def _start_servers(self, file: LauncherFile, probe: TransportSecurity | None) -> str | None:
        """The object storage server and the scheduler, started side by side (each takes seconds to import and bind;
        the scheduler waits for its storage itself), each said once it answers, the storage first; the scheduler's
        monitor address, None without a scheduler. The storage is waited for with itself alone in view: one that
        exits first is named as when it started alone."""
        storage, scheduler = file.object_storage_server, file.scheduler
        storage_address = str(parse_address(storage.bind_address).connectable()) if storage is not None else None
        storage_child = None
        if storage is not None:
            storage_child = self._start("object storage server", ["scaler.object_storage.server",
                                                                  section_to_json(storage)])  # fmt: skip
        scheduler_child = None
        if scheduler is not None:
            self._check_signals()
            scheduler = self._scheduler_settings(scheduler, storage_address)
            scheduler_child = self._start("scheduler", ["scaler.scheduler.process", section_to_json(scheduler)])
        if storage is not None and storage_child is not None:
            wait_for_object_storage(str(storage_address), READY_TIMEOUT_SECONDS, [storage_child.process],
                                    security=probe, between_tries=self._check_signals)  # fmt: skip
            print(f"scaler: object storage server at {storage.bind_address} (pid {storage_child.process.pid})",
                  flush=True)  # fmt: skip
        if scheduler is None or scheduler_child is None:
            return None
        self._check_signals()
        address = str(parse_address(scheduler.bind_address).connectable())
        wait_for_scheduler(address, READY_TIMEOUT_SECONDS, [c.process for c in self._children], security=probe,
                           between_tries=self._check_signals)  # fmt: skip
        monitor = scheduler.monitor_address or str(parse_address(scheduler.bind_address).with_port_offset(2))
        print(f"scaler: scheduler at {scheduler.bind_address} (pid {scheduler_child.process.pid}), monitor at "
              f"{monitor}", flush=True)  # fmt: skip
        return monitor

    def _announce_managers(
        self, managers: list[tuple[WorkerManagerSettings, Child]], feed: tuple[str, TransportSecurity | None] | None
    ) -> None:
        """Say each manager once it has registered with the scheduler (seen on the monitor feed: a script that waits
        for the line can use the stack then), or, for a fixed pool, once one of its workers has; at once without a
        feed to look at. A manager that exits first (its settings or environment refused) stops the start-up, naming
        it."""
        waiting = {with_manager_id(manager).worker_manager_id: (manager, child) for manager, child in managers}
        reader = FeedReader(feed[0], topics=(STATUS_TOPIC,), security=feed[1]) if feed is not None else None
        started = time.monotonic()
        last_status, noticed = started, started
        try:
            while waiting and reader is not None and not self._signals:  # a signal now: a normal stop
                now = time.monotonic()
                try:
                    message = reader.receive(POLL_SECONDS)
                except FeedConnectionError:  # the stack's own keys: the other side is gone, or was in passing
                    self._raise_if_hub_ended()
                    logger.warning("the scheduler's monitor feed stopped answering: not waiting for the worker "
                                   "managers to register")  # fmt: skip
                    break
                if isinstance(message, m.StatusSnapshot):
                    last_status = now
                    # a manager registers; a fixed pool's workers do, with its id
                    up = {summary.manager_id for summary in message.managers}
                    up.update(worker.manager_id for worker in message.workers)
                    for manager_id in up & set(waiting):
                        self._announce(*waiting.pop(manager_id))
                for _manager, child in waiting.values():
                    code = child.process.poll()
                    if code is not None:
                        raise RuntimeError(f"{child.name} exited before it registered with the scheduler "
                                           f"({describe_exit(code)}); its log above says why")  # fmt: skip
                if now - last_status > READY_TIMEOUT_SECONDS:
                    logger.warning("no status from the scheduler's monitor for %g s: not waiting for the worker "
                                   "managers to register", READY_TIMEOUT_SECONDS)  # fmt: skip
                    break
                if waiting and now - noticed >= MANAGER_NOTICE_SECONDS:
                    noticed = now
                    names = ", ".join(child.name for _manager, child in waiting.values())
                    logger.info("waiting for %s to register (%.0f s)", names, now - started)
        finally:
            if reader is not None:
                reader.close()
        for manager, child in waiting.values() if not self._signals else ():
            self._announce(manager, child)

    @staticmethod
    def _announce(manager: WorkerManagerSettings, child: Child) -> None:
        print(f"scaler: worker manager {manager.worker_manager_id!r} ({manager_type_of(manager).name}) for "
              f"{manager.scheduler_address} (pid {child.process.pid})", flush=True)  # fmt: skip

    def _watch_feed(self, monitor_address: str, security: TransportSecurity | None) -> None:
        """Read the scheduler's status snapshots when the stack stops by itself (idle, no client)."""
        if self._autostop.enabled:
            self._feed_source = monitor_address, security
            self._feed = FeedReader(monitor_address, topics=(STATUS_TOPIC,), security=security)

    def _raise_if_hub_ended(self) -> None:
        """A feed read with the stack's own keys that stops answering them means that its other side is gone, not
        that the keys are wrong (a forwarder to a hub that ended accepts and drops each connection, which fails
        its handshake): RuntimeError saying so when the hub in the cloud ended."""
        problem = self._cloud.problem(now=True) if self._cloud is not None else None
        if problem is not None:
            raise RuntimeError(problem)

    def _feed_stopped_answering(self) -> None:
        """The watch's feed stopped answering: the stack ends when its hub did (RuntimeError), else the feed is
        read again from a new subscription (a scheduler restarted, a connection dropped in passing)."""
        self._raise_if_hub_ended()
        if self._cloud is None or not self._cloud.cloud_silent:  # a silent cloud was said once (cloud_stack)
            logger.warning("the scheduler's monitor feed stopped answering: subscribing again")
        if self._feed is not None:
            self._feed.close()
            self._feed = None
        if self._feed_source is not None:
            self._feed = FeedReader(self._feed_source[0], topics=(STATUS_TOPIC,), security=self._feed_source[1])

    def _scheduler_settings(self, scheduler: SchedulerConfig, storage_address: str | None) -> SchedulerConfig:
        """A scheduler without -osa uses the file's object storage server when there is one; one with a manager
        whose tasks run where this machine's files are not tells its clients to send their modules by value."""
        if scheduler.object_storage_address is None and storage_address is not None:
            scheduler = replace(scheduler, object_storage_address=storage_address)
        if any(manager_type_of(manager).runs_elsewhere for manager in self._file.worker_managers):
            scheduler = replace(scheduler, ship_local_modules=True)
        return scheduler

    def _start(self, name: str, module_args: list[str]) -> Child:
        child = Child(name, _start_child(module_args), module_args)
        self._children.append(child)
        # debug only: the line printed once the child answers says it with its address (it was said twice)
        logger.debug("started %s (pid %d)", name, child.process.pid)
        return child

    def _check_signals(self) -> None:
        if self._signals:
            raise _Interrupted(signal.Signals(self._signals[0]).name)

    # ------------------------------------------------------------ watch and stop

    def _watch(self) -> int:
        while not self._signals:
            try:
                reason = self._stop_reason()
            except FeedConnectionError:
                try:
                    self._feed_stopped_answering()
                except RuntimeError as error:
                    logger.error("%s", error)
                    return ExitCode.ERROR
                continue
            if reason is not None:
                logger.info("stopping the stack: %s", reason)
                print(f"scaler: stopping the stack: {reason}", flush=True)
                return ExitCode.OK
            cloud = self._cloud.problem() if self._cloud is not None else None
            if cloud is not None:
                logger.error("%s", cloud)
                return ExitCode.ERROR
            for child in self._children:
                code = child.process.poll()
                if code is None:
                    continue
                if child.name == "scheduler" and child.restarts < SCHEDULER_RESTARTS:
                    self._restart(child, code)  # clients, workers and managers re-attach to the new one
                    continue
                lost = self._cloud.lost_with(child.name, time.monotonic()) if self._cloud is not None else None
                if lost is not None:
                    logger.error("%s", lost)
                    return ExitCode.ERROR
                logger.error("%s exited unexpectedly (%s); stopping the rest", child.name, describe_exit(code))
                return ExitCode.ERROR
            time.sleep(POLL_SECONDS)
        logger.info("received %s: stopping", signal.Signals(self._signals[0]).name)
        return ExitCode.OK

    def _stop_reason(self) -> str | None:
        """Why the stack stops by itself now (idle, no client), or None."""
        if self._feed is None:
            return None
        now = time.monotonic()
        while (message := self._feed.receive(0)) is not None:
            if isinstance(message, m.StatusSnapshot):
                self._autostop.observe(message, now)
        return self._autostop.reason(now)

    def _restart(self, child: Child, code: int) -> None:
        child.restarts += 1
        delay = min(RESTART_BACKOFF_CAP_SECONDS, 2 ** (child.restarts - 1))
        logger.error(
            "%s exited unexpectedly (%s); restarting it (%d of %d) in %g s",
            child.name, describe_exit(code), child.restarts, SCHEDULER_RESTARTS, delay,
        )  # fmt: skip
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and not self._signals:
            time.sleep(POLL_SECONDS)
        if self._signals:
            return
        child.process = _start_child(child.module_args)
        print(f"scaler: {child.name} restarted (pid {child.process.pid})", flush=True)

    def _stop_all(self) -> None:
        stop_in_order([(child.name, child.process) for child in self._children], self._grace_seconds,
                      hurried=lambda: len(self._signals) > 1)  # fmt: skip


def taken_port_problem(file: LauncherFile) -> str | None:
    """Why a server of the file cannot listen where it says, its port being taken (by another stack, or a server
    of it left running), naming the port's process; None when every one is free. Checked before anything starts:
    a server already there would answer the readiness probe in the place of the one that cannot start."""
    bound: list[tuple[str, str]] = []
    if file.object_storage_server is not None:
        bound.append(("the object storage server", file.object_storage_server.bind_address))
    if file.scheduler is not None:
        scheduler = file.scheduler
        monitor = scheduler.monitor_address or str(parse_address(scheduler.bind_address).with_port_offset(2))
        bound += [("the scheduler", scheduler.bind_address), ("the scheduler's monitor feed", monitor)]
    if file.gui is not None:
        bound.append(("the dashboard", f"tcp://{file.gui.gui_address}"))
    for what, address in bound:
        problem = address_in_use_problem(address)
        if problem is not None:
            return f"{what} cannot listen at {problem}"
    return None


class _Interrupted(Exception):
    """SIGINT or SIGTERM arrived during the start-up: the stack stops, as it would once started."""


def _start_child(module_args: list[str]) -> subprocess.Popen[bytes]:
    """A child in a process group of its own: a Ctrl-C in the terminal reaches the launcher alone (it dies with the
    launcher all the same, `start_python_child`)."""
    return start_python_child(module_args, new_session=True)


def _wait_for_page(
    url: str, timeout_seconds: float, process: subprocess.Popen[bytes], between_tries: Callable[[], None]
) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        between_tries()
        if process.poll() is not None:
            raise RuntimeError(f"the dashboard exited during start-up ({describe_exit(process.returncode)})")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    raise RuntimeError(f"the dashboard did not answer at {url} within {timeout_seconds:g} s")
