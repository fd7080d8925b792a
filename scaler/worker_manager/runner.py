"""The asyncio shell every worker manager type shares: the scheduler link and the reconcile loop.

It decides nothing itself. The scheduler link (`scaler.protocol.scheduler_link`) decides registration,
heartbeats and liveness: a refusal, such as a duplicate manager id, ends the manager with exit code 1
and the scheduler's reason in the log; a scheduler silent for longer than the scheduler timeout (the
workers' death timeout) ends it with exit 2 if it never answered, 3 if it went away; a tunnel address whose
certificate does not verify or whose proxy refuses (`scaler.io.tunnel.relay.refusal`) ends it with exit 2. The
reconciler decides launches and terminations: on every new target and on a timer, `backend.list_units()` ->
`Reconciler.plan` -> `backend.terminate` / `backend.launch`. Backend errors are logged and retried with
the reconciler's back-off; they never end the manager.

It stops on SIGINT/SIGTERM or the scheduler's Shutdown (units terminated, exit 0), and when the link is
lost (units terminated).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import uuid
from dataclasses import dataclass
from math import ceil

import psutil
import zmq

from scaler.io.clock import REAL_CLOCK, Clock
from scaler.io.sockets import SocketFactory, Sockets, TransportSecurity
from scaler.io.tunnel.relay import refusal
from scaler.io.zmq_async import AsyncSocket
from scaler.io.zmq_parts import Frames
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.exit_codes import EXIT_CONFIGURATION, ExitCode
from scaler.protocol.handshake import local_python_version
from scaler.protocol.scheduler_link import (
    Forgotten,
    LinkEffect,
    LinkSettings,
    Lost,
    Registered,
    RegistrationRefused,
    SchedulerLink,
    SendHeartbeat,
    SendHello,
    StillWaiting,
)
from scaler.worker_manager.backend import LaunchSpec, UnitBackend, UnitState
from scaler.worker_manager.reconciler import Reconciler, ReconcilerSettings, Target
from scaler.worker_manager.unit_waits import describe_waits

logger = logging.getLogger(__name__)

EXIT_OK = ExitCode.OK
EXIT_ERROR = ExitCode.ERROR  #: refused by the scheduler, or a configuration error
EXIT_NEVER_CONNECTED = ExitCode.NEVER_CONNECTED  #: the scheduler never answered within the scheduler timeout
EXIT_SCHEDULER_LOST = ExitCode.SCHEDULER_LOST  #: the scheduler stopped answering

#: How long a reconcile pass in progress may take to finish when the manager stops.
RECONCILE_FINISH_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    scheduler_address: str  #: where the manager itself connects
    manager_id: str
    manager_type: str  #: e.g. baremetal_native
    capabilities: m.Capabilities = ()  #: what each worker advertises
    max_workers: m.WorkerLimit = None  #: None = unlimited
    heartbeat_interval_seconds: float = 2.0
    reconcile_interval_seconds: float = 1.0
    scheduler_timeout_seconds: float = 300.0
    stop_timeout_seconds: float = 20.0  #: how long shutdown waits for the units to be gone
    pending_timeout_seconds: float = 300.0
    scale_down_cooldown_seconds: float = 0.0  #: a surplus of units is stopped only once it lasted this long
    billing_granularity_seconds: float = 0.0  #: the reconciler's rule 11
    billing_minimum_seconds: float = 0.0
    io_threads: int = 1
    worker_cost_per_hour: float = 0.0  #: told to the scheduler (cost policy, spend rate)
    expected_boot_seconds: float | None = None  #: told to the scheduler; None: the measured boot time is used
    min_workers: int = 0  #: told to the scheduler: workers kept even when idle (every policy keeps them)
    buffer_workers: int = 0  #: told to the scheduler: idle workers kept beyond what the queue needs
    max_waiting_units: int | None = None  #: most units waiting in their provider's queue at once; None: no cap


class ManagerRunner:
    def __init__(
        self,
        settings: RunnerSettings,
        backend: UnitBackend,
        spec: LaunchSpec,
        clock: Clock = REAL_CLOCK,
        security: TransportSecurity | None = None,
        sockets: Sockets | None = None,
    ) -> None:
        """`clock`: every wait, and the time of events (the reconciler's is wall-clock seconds, as
        UnitInfo.created_at); `sockets`: where its connection comes from (default: a SocketFactory with `security`)."""
        self._settings = settings
        self._security = security  #: secures the manager's connection to the scheduler (None: plain TCP)
        self._backend = backend
        self._spec = spec
        self._clock = clock
        self._sockets = sockets
        workers_per_unit = backend.workers_per_unit
        max_units = None if settings.max_workers is None else ceil(settings.max_workers / workers_per_unit)
        self._reconciler = Reconciler(
            ReconcilerSettings(
                workers_per_unit=workers_per_unit,
                max_units=max_units,
                pending_timeout_seconds=settings.pending_timeout_seconds,
                scale_down_cooldown_seconds=settings.scale_down_cooldown_seconds,
                billing_granularity_seconds=settings.billing_granularity_seconds,
                billing_minimum_seconds=settings.billing_minimum_seconds,
                max_waiting_units=settings.max_waiting_units,
            )
        )
        #: what the Hello reports: whole units' worth of workers
        self._max_workers = None if max_units is None else max_units * workers_per_unit
        self._identity = f"Manager|{settings.manager_type}|{uuid.uuid4().hex}".encode()
        self._target: Target | None = None
        self._link = SchedulerLink(
            LinkSettings(
                address=settings.scheduler_address,
                heartbeat_interval_seconds=settings.heartbeat_interval_seconds,
                timeout_seconds=settings.scheduler_timeout_seconds,
                pause_after_seconds=max(1.0, 4 * min(0.5, settings.heartbeat_interval_seconds)),  # 4 ticks
            )
        )
        self._stop_units = True  #: False when refused: the units may belong to the manager holding this id
        self._stopping = False
        self._last_failure = ""  #: the failure logged last (not logged again while it repeats)
        self._said_waits = ""  #: the units' waits (their reasons) and the launches held, as last logged
        self.exit_reason = ""

    # ------------------------------------------------------------ lifetime

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._done: asyncio.Future[int] = loop.create_future()
        self._wake = asyncio.Event()
        sockets = self._sockets or SocketFactory(self._settings.io_threads, self._security)
        sock = sockets.dealer(self._settings.scheduler_address, identity=self._identity)
        self._socket = AsyncSocket(loop, sock, self._on_frames)
        signals = self._install_signal_handlers(loop)
        logger.info(
            "worker manager %r (%s) connecting to %s; at most %s workers",
            self._settings.manager_id, self._settings.manager_type, self._settings.scheduler_address,
            "unlimited" if self._max_workers is None else self._max_workers,
        )  # fmt: skip
        self._process = psutil.Process()
        self._process.cpu_percent()
        self._follow_link(self._link.start(self._clock.now()))
        heartbeat = asyncio.ensure_future(self._tick_routine())
        reconcile = asyncio.ensure_future(self._reconcile_routine())
        try:
            code = await self._done
        finally:
            self._stopping = True
            self._wake.set()
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
            await self._finish_routine(reconcile)
        try:
            if self._stop_units:
                await self._stop_all_units(self.exit_reason)
            await self._backend.close()
        except Exception:
            logger.exception("the backend failed while the manager was stopping")
            code = code or EXIT_ERROR
        finally:
            # only now: a second Ctrl-C (or SIGTERM) while the units are being stopped must not cut their
            # termination short (a KeyboardInterrupt, or SIGTERM's default death), which would leave cloud units
            # running until their lease ends
            for signum in signals:
                loop.remove_signal_handler(signum)
            self._socket.close()
            sockets.close()
        return code

    def stop(self, reason: str, code: int = EXIT_OK) -> None:
        done: asyncio.Future[int] | None = getattr(self, "_done", None)
        if done is not None and not done.done():
            self.exit_reason = reason
            log = logger.info if code == EXIT_OK else logger.error
            log("worker manager %r stopping: %s", self._settings.manager_id, reason)
            done.set_result(code)

    def _install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        installed: list[int] = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, self.stop, f"received {signal.Signals(signum).name}")
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
                continue
            installed.append(signum)
        return installed

    async def _finish_routine(self, routine: asyncio.Future[None]) -> None:
        """Let a reconcile pass in progress finish (a launch cut short could lose track of a unit)."""
        try:
            await asyncio.wait_for(routine, RECONCILE_FINISH_SECONDS)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            pass
        except Exception:
            logger.exception("the reconcile loop failed")

    async def _stop_all_units(self, reason: str) -> None:
        """Terminate every unit and wait (up to stop_timeout_seconds) until none is left."""
        deadline = self._clock.now() + self._settings.stop_timeout_seconds
        announced = False
        while True:
            try:
                units = [unit for unit in await self._backend.list_units() if unit.state is not UnitState.GONE]
            except Exception as error:
                logger.error("could not list the units to stop them: %s", error)
                return
            if not units:
                return
            if not announced:
                announced = True
                logger.info("terminating %d unit(s)", len(units))
            running = [unit.unit_id for unit in units if unit.state is not UnitState.STOPPING]
            if running:
                try:
                    await self._backend.terminate(running, f"the worker manager is stopping: {reason}")
                except Exception as error:
                    logger.error("could not terminate units %s: %s", ", ".join(running), error)
            if self._clock.now() > deadline:
                left = ", ".join(f"{unit.unit_id} ({unit.state.value})" for unit in units)
                logger.warning("units still not gone after %g s: %s", self._settings.stop_timeout_seconds, left)
                return
            await self._clock.sleep(0.2)

    # ------------------------------------------------------------ scheduler link

    def _hello(self) -> m.Hello:
        settings = self._settings
        info = m.ManagerInfo(
            settings.manager_id, settings.capabilities, self._max_workers, settings.manager_type,
            settings.worker_cost_per_hour, settings.expected_boot_seconds, settings.min_workers,
            settings.buffer_workers,
        )  # fmt: skip
        return m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(), info)

    def _send(self, message: m.Message) -> None:
        try:
            self._socket.send([codec.encode(message)])
        except zmq.ZMQError as error:
            logger.warning("could not send %s to the scheduler: %s", type(message).__name__, error)

    def _on_frames(self, frames: Frames) -> None:
        for frame in frames:
            try:
                messages = [codec.decode(part) for part in codec.split(frame)]  # a batch may be joined in one part
            except codec.DecodeError as error:
                logger.warning("undecodable frame from the scheduler: %s", error)
                continue
            for message in messages:
                self._on_message(message)

    def _on_message(self, message: m.Message) -> None:
        self._follow_link(self._link.on_message(message, self._clock.now()))
        if isinstance(message, m.ManagerTarget):
            self._target = Target.of(message)
            self._wake.set()
        elif isinstance(message, m.Shutdown):
            self.stop(f"the scheduler asked the manager to stop: {message.reason or 'no reason given'}")
        elif isinstance(message, m.ProtocolError) and message.kind is not m.ProtocolErrorKind.UNKNOWN_PEER:
            logger.warning("the scheduler refused a message: %s", message.reason)
        elif not isinstance(message, (m.HeartbeatEcho, m.Ping, m.HelloReply, m.ProtocolError)):
            logger.warning("unexpected %s from the scheduler; ignored", type(message).__name__)

    def _follow_link(self, effects: list[LinkEffect]) -> None:
        for effect in effects:
            if isinstance(effect, SendHello):
                self._send(self._hello())
            elif isinstance(effect, SendHeartbeat):
                self._send(self._heartbeat(effect.round_trip_seconds))
            elif isinstance(effect, Registered):
                again = " again" if effect.again else ""
                logger.info("registered%s with the scheduler at %s", again, self._settings.scheduler_address)
                self._wake.set()
            elif isinstance(effect, Forgotten):
                logger.warning("the scheduler forgot this manager (%s): registering again", effect.reason)
            elif isinstance(effect, RegistrationRefused):
                self._stop_units = False  # the units may belong to the manager that holds this id
                self.stop(effect.reason, EXIT_ERROR)
            elif isinstance(effect, Lost):
                self.stop(effect.reason, effect.exit_code)
            elif isinstance(effect, StillWaiting):
                logger.warning("%s", effect.text)

    def _heartbeat(self, round_trip_seconds: float) -> m.Heartbeat:
        reconciler = self._reconciler
        status = m.ManagerStatus(
            reconciler.units, reconciler.pending_units, reconciler.boot_seconds, reconciler.queue.waits,
            reconciler.queue.held,
        )  # fmt: skip
        try:
            cpu, rss = self._process.cpu_percent(), self._process.memory_info().rss
        except psutil.Error:
            cpu, rss = 0.0, 0
        return m.Heartbeat(cpu, rss, manager=status, round_trip_seconds=round_trip_seconds)

    async def _tick_routine(self) -> None:
        tick_seconds = min(0.5, self._settings.heartbeat_interval_seconds)
        while True:
            await self._clock.sleep(tick_seconds)
            refused = refusal(self._settings.scheduler_address)
            if refused is not None:  # a tunnel's certificate or proxy: it will not start answering by waiting
                self.stop(refused, EXIT_CONFIGURATION)
                return
            self._follow_link(self._link.on_tick(self._clock.now()))

    # ------------------------------------------------------------ reconcile loop

    async def _reconcile_routine(self) -> None:
        delay = self._settings.reconcile_interval_seconds
        while not self._stopping:
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            if self._stopping or not self._link.is_registered:
                continue
            delay = await self._reconcile_once()

    async def _reconcile_once(self) -> float:
        """One pass; returns the delay until the next timed pass."""
        try:
            units = await self._backend.list_units()
        except Exception as error:
            delay = self._reconciler.list_failed()
            self._failed(
                logging.WARNING, f"could not list the units ({_describe(error)})", f"; next attempt in {delay:g} s"
            )
            logger.debug("list_units failed", exc_info=True)
            return delay
        if self._last_failure.startswith("could not list"):
            self._last_failure = ""
        target = self._target
        plan = self._reconciler.plan(target, units, self._clock.wall())
        for note in plan.notes:
            logger.info("%s", note)
        self._say_waits()
        for unit_id, seconds in plan.reclaimed:
            self._send(m.UnitsReclaimed((unit_id,), seconds))
        if plan.terminate:
            await self._terminate(list(plan.terminate))
        if plan.launch:
            await self._launch(plan.launch, target)
        return self._settings.reconcile_interval_seconds

    def _say_waits(self) -> None:
        """Log why units wait and why launches are held, once per change of the reasons (not of the counts)."""
        queue = self._reconciler.queue
        reasons = ", ".join(wait.reason for wait in queue.waits)
        said = f"{reasons}|{queue.held}"
        before, self._said_waits = self._said_waits, said
        if said == before:
            return
        if queue.waits:
            logger.info("%s", describe_waits(queue.waits))
        elif before.partition("|")[0]:
            logger.info("no unit waits in the provider's queue any more")
        if queue.held:
            logger.info("launches held back: %s", queue.held)

    def _failed(self, level: int, text: str, when: str) -> None:
        """Log a failure once: the same failure again (a cloud error retried with back-off) only at DEBUG."""
        if text == self._last_failure:
            logger.debug("%s (again)%s", text, when)
            return
        self._last_failure = text
        logger.log(level, "%s%s; the same error again will not be repeated here", text, when)

    async def _terminate(self, unit_ids: list[str]) -> None:
        self._reconciler.terminating(unit_ids)
        try:
            await self._backend.terminate(unit_ids, "the scheduler's target is lower")
        except Exception as error:
            logger.warning("could not terminate %s (%s); will retry", ", ".join(unit_ids), _describe(error))
            logger.debug("terminate failed", exc_info=True)
            self._reconciler.terminate_failed(unit_ids)

    async def _launch(self, count: int, target: Target | None) -> None:
        logger.info(
            "launching %d unit(s): target %s workers, %d unit(s) counted",
            count, target.workers if target else "-", self._reconciler.units,
        )  # fmt: skip
        try:
            unit_ids = await self._backend.launch(count, self._spec)
        except Exception as error:
            self._reconciler.launch_failed(self._clock.wall())
            delay = self._reconciler.backoff_seconds()
            self._failed(
                logging.ERROR, f"launching unit(s) failed ({_describe(error)})", f"; next attempt in {delay:g} s"
            )
            logger.debug("launch failed", exc_info=True)
            return
        self._reconciler.launched(unit_ids, count, self._clock.wall())
        self._last_failure = ""
        logger.info("launched unit(s) %s", ", ".join(unit_ids) or "(none)")
        if len(unit_ids) < count:
            logger.warning("asked for %d unit(s), the backend launched %d", count, len(unit_ids))


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
