"""`scaler.performance_report(path)`: a context manager that records the scheduler's monitor feed while its block
runs and writes one self-contained HTML run report at the end (docs/guide/monitoring_and_security.md).

The shell: a thread subscribes to the feed (the same PUB socket `scaler_top` and the dashboard read), feeds every
message to a pure `RunRecord`, and stops a little after the block ends; `report_page` renders the record. Which
scheduler: `monitor_address` if given, else `address` (a scheduler's address; its monitor is port + 2, the
convention every command and the cluster follow), else the one scheduler this process obviously talks to (its
connected clients, the `SchedulerClusterCombo`s it runs, or the scheduler of the task it runs in).
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
from pathlib import Path
from types import TracebackType

from scaler.io.address import parse_address
from scaler.io.sockets import TransportSecurity
from scaler.monitor import local_schedulers
from scaler.monitor.feed import FIND_KEYS, FeedError, FeedReader
from scaler.monitor.report_page import render_report
from scaler.monitor.run_record import RecordLimits, RunRecord
from scaler.payload import processor_context
from scaler.protocol import messages as m

logger = logging.getLogger(__name__)

#: How long entering waits for the feed's first status before saying the scheduler cannot be heard.
CONNECT_TIMEOUT_SECONDS = 15.0
#: Statuses awaited after the block ends: the second is built after the block's last result reached the client.
STATUSES_AFTER_EXIT = 2
#: How long leaving waits for those statuses at most (the scheduler publishes one per status interval, 1 s).
SETTLE_TIMEOUT_SECONDS = 15.0
POLL_SECONDS = 0.1


class ReportWriteError(OSError):
    """The run report could not be written to its path."""


class RunReport:
    """Records the monitor feed from `__enter__` to `__exit__` and writes the report to `path` at `__exit__`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        monitor_address: str,
        security: TransportSecurity | None = None,
        limits: RecordLimits | None = None,
        title: str = "scaler run report",
    ) -> None:
        self.path = Path(path)
        self.monitor_address = monitor_address
        self.title = title
        self._security = security
        self.record = RunRecord(limits)
        self._problems: list[str] = []
        self._lock = threading.Lock()
        self._first_status = threading.Event()
        self._exit_requested = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> RunReport:
        self._thread = threading.Thread(target=self._listen, name="scaler-run-report", daemon=True)
        self._thread.start()
        if not self._first_status.wait(CONNECT_TIMEOUT_SECONDS) or self._stopped.is_set():
            self._stop()
            problem = self._problems[-1] if self._problems else f"no status within {CONNECT_TIMEOUT_SECONDS:g} s"
            raise ConnectionError(
                f"performance_report: cannot read the scheduler's monitor feed at {self.monitor_address} "
                f"({problem}): is the scheduler running, and is that its monitor address (its port + 2 unless it was "
                "started with --monitor-address)? Pass monitor_address=... to name it."
            )
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._exit_requested.set()
        self._stopped.wait(SETTLE_TIMEOUT_SECONDS)
        self._stop()
        try:
            self.write()
        except ReportWriteError:
            if error is None:
                raise
            logger.exception("the run report was not written (the block raised too, which goes on)")

    def write(self) -> None:
        """Render what was recorded and write it in one piece (a temporary file renamed over `path`)."""
        with self._lock:
            page = render_report(self.record, self.title, _now_text(), tuple(self._problems))
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(page, encoding="utf-8")
            os.replace(temporary, self.path)
        except OSError as error:
            _remove_quietly(temporary)
            raise ReportWriteError(
                error.errno, f"cannot write the run report to {self.path}: {error.strerror or error}", str(self.path)
            ) from error

    def _stop(self) -> None:
        self._exit_requested.set()
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _listen(self) -> None:
        """The thread: every feed message into the record until a little after the block ended."""
        try:
            keys = self._security if self._security is not None else FIND_KEYS  # none given: as a client finds them
            with FeedReader(self.monitor_address, security=keys) as reader:
                self._read(reader)
        except (FeedError, OSError, ValueError) as error:  # a feed it cannot read: the report says so
            self._problems.append(str(error))
        finally:
            self._stopped.set()

    def _read(self, reader: FeedReader) -> None:
        statuses_after_exit = 0
        while not self._stopped.is_set():
            message = reader.receive(POLL_SECONDS)
            if message is None:
                continue
            exiting = self._exit_requested.is_set()
            with self._lock:
                self.record.on_message(message)
            if isinstance(message, m.StatusSnapshot):
                self._first_status.set()
                statuses_after_exit += exiting
                if statuses_after_exit >= STATUSES_AFTER_EXIT:
                    self._drain(reader)
                    return

    def _drain(self, reader: FeedReader) -> None:
        """The messages published with the last status (its transitions and decisions follow it at once)."""
        while (message := reader.receive(POLL_SECONDS)) is not None and not isinstance(message, m.StatusSnapshot):
            with self._lock:
                self.record.on_message(message)


def performance_report(
    path: str | os.PathLike[str],
    address: str | None = None,
    *,
    monitor_address: str | None = None,
    security: TransportSecurity | None = None,
) -> RunReport:
    """`with scaler.performance_report("run.html"):` records what the scheduler does while the block runs and
    writes one self-contained HTML report to `path` when it ends (a path that cannot be written raises
    ReportWriteError there, naming it; the block itself runs as usual). `address`: the scheduler's address, when
    this process has no single obvious one; `monitor_address`: its monitor feed's, when not port + 2."""
    if monitor_address is None:
        found, found_security = default_monitor_address(address)
        monitor_address, security = found, security if security is not None else found_security
    parse_address(monitor_address)
    return RunReport(path, monitor_address, security)


def default_monitor_address(address: str | None) -> tuple[str, TransportSecurity | None]:
    """The monitor address of `address`, else of the one scheduler this process talks to."""
    combos = local_schedulers.started()
    if address is not None:
        return combos.get(address) or str(parse_address(address).with_port_offset(2)), None
    found: dict[str, TransportSecurity | None] = {monitor: None for monitor in combos.values()}
    for scheduler, client_security in local_schedulers.client_schedulers():
        found.setdefault(combos.get(scheduler) or _monitor_of(scheduler), client_security)
    context = processor_context.current()
    if context is not None:
        found.setdefault(_monitor_of(context.scheduler_address), context.security)
    if len(found) == 1:
        return next(iter(found.items()))
    if not found:
        raise ValueError(
            "performance_report: no connected Client, SchedulerClusterCombo or task in this process names a "
            "scheduler; pass its address, e.g. performance_report('run.html', address='tcp://127.0.0.1:8516')"
        )
    raise ValueError(
        f"performance_report: this process talks to several schedulers (monitor feeds {sorted(found)}); pass the "
        "address of the one to report on, e.g. performance_report('run.html', address=client.address)"
    )


def _monitor_of(scheduler_address: str) -> str:
    return str(parse_address(scheduler_address).connectable().with_port_offset(2))


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _now_text() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
