"""Running a scheduler process from its settings section: addresses, object storage, loop, signals."""

from __future__ import annotations

if __name__ == "__main__":  # `python -m scaler.scheduler.process`: on glibc's malloc (allocator.py says why)
    # The process executes itself again here, before the imports below, which would otherwise be imported twice.
    from scaler.scheduler.allocator import use_the_system_allocator

    use_the_system_allocator()

import asyncio
import gc
import logging
import os
import signal
from collections.abc import Callable

import zmq

from scaler.config.fields import core_values
from scaler.config.sections import SchedulerConfig, section_from_json
from scaler.io.address import AddressError, parse_address
from scaler.io.event_loop import close_loop, new_event_loop
from scaler.io.port_owner import address_in_use_problem
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.io.start_signals import StartSignals, StopRequested
from scaler.io.tunnel import TunnelError
from scaler.io.tunnel.tls import ServerCertificate
from scaler.policy.registry import ResolvedPolicy
from scaler.protocol.exit_codes import EXIT_CONFIGURATION, ExitCode
from scaler.protocol.handshake import local_python_version
from scaler.scheduler.core.scheduler_core import SchedulerCore
from scaler.scheduler.core.settings import CoreSettings
from scaler.scheduler.scaling_hook import policy_config, scaling_hook_of
from scaler.scheduler.storage_child import StorageChild, storage_settings_of
from scaler.security.connection_files import MONITOR_SERVICE, SCHEDULER_SERVICE, STORAGE_SERVICE
from scaler.security.find import ServedAddresses, ServerKeys, server_keys
from scaler.security.key_files import KeyFileError
from scaler.security.tls_settings import server_certificate

logger = logging.getLogger(__name__)


def derived_addresses(config: SchedulerConfig) -> tuple[str, str, str | None]:
    """(bind address, monitor address, object storage address or None when the scheduler starts one)."""
    bind = parse_address(config.bind_address)
    monitor = config.monitor_address or str(bind.with_port_offset(2))
    parse_address(monitor)
    if config.object_storage_address is not None:
        parse_address(config.object_storage_address)
    if config.tunnel_address is not None:
        front = parse_address(config.tunnel_address)
        if not front.is_tunnel or bind.is_tunnel or parse_address(monitor).is_tunnel:
            raise AddressError(
                f"--tunnel-address {config.tunnel_address}: a tls://, ws:// or wss:// address beside a native (tcp:// "
                f"or ipc://) bind address and monitor address, not {bind}"
            )
    return str(bind), monitor, config.object_storage_address


def run_scheduler(config: SchedulerConfig, security: TransportSecurity | None = None) -> int:
    """Run a scheduler until it stops; its exit code. `security` secures every socket it binds or connects
    (None: the CURVE keys of its settings; without any, the user's keys, unless `insecure`)."""
    try:
        resolved = ServerKeys(security) if security is not None else server_keys(config, "the scheduler")
        security = resolved.security
        bind, monitor, storage = derived_addresses(config)
        fronted = (config.tunnel_address,) if config.tunnel_address else ()
        certificate = server_certificate(config, (bind, monitor, *fronted))
        policy = policy_config(config.policy_engine_type, config.policy_content)  # the one parse of the policy
    except (AddressError, KeyFileError, ValueError) as error:  # a misspelt policy too: refused before anything starts
        logger.error("%s", error)
        return EXIT_CONFIGURATION

    taken = [problem for problem in map(address_in_use_problem, (bind, monitor)) if problem]
    if taken:  # before anything is started for a scheduler that cannot run
        logger.error("cannot start: %s", "; ".join(taken))
        return EXIT_CONFIGURATION
    storage_child: StorageChild | None = None
    with StartSignals() as signals:  # Ctrl-C while waiting for object storage: recorded, acted on by the waits
        try:
            public_storage = storage
            if storage is None:
                public_storage = str(parse_address(bind).with_port_offset(1))
                logger.info(
                    "no --object-storage-address given: starting an object storage server at %s (port + 1)",
                    public_storage,
                )  # fmt: skip
                storage = _own_storage_address(public_storage)
                storage_child = StorageChild(storage_settings_of(config, storage), security)  # the scheduler's keys
                storage_child.start(signals.raise_if_received)
                if storage != public_storage:
                    _serve_own_storage(public_storage, storage, certificate)
            else:
                if config.object_storage_max_memory is not None or config.object_storage_spill_directory is not None:
                    logger.warning(
                        "--object-storage-max-memory and --object-storage-spill-directory apply to the object storage "
                        "server a scheduler starts; with --object-storage-address, give them to that server instead"
                    )
                _check_object_storage(storage, security, signals.raise_if_received)
            assert public_storage is not None
            advertised = config.advertised_object_storage_address or str(parse_address(public_storage).connectable())
            settings = core_settings_of(config, bind, advertised, policy, instance_id=os.urandom(8))
            core = SchedulerCore(settings, scaling_hook_of(policy, settings.manager_timeout_seconds))
            served = ServedAddresses(
                resolved, {SCHEDULER_SERVICE: bind, MONITOR_SERVICE: monitor}, known={STORAGE_SERVICE: public_storage},
                ship_local_modules=config.ship_local_modules,
            )  # fmt: skip
            if config.tunnel_address:
                _serve_front(config.tunnel_address, (bind, storage, monitor), certificate)
            sockets = SocketFactory(config.io_threads, security, config.link_heartbeat_timeout_seconds, certificate)
            signals.raise_if_received()
            return _serve(core, config, bind, monitor, storage, storage_child, sockets, served, signals)
        except StopRequested as stop:
            logger.info("scheduler stopped: %s", stop)
            return ExitCode.OK
        except TunnelError as error:  # a tunnel's port in use, a missing extra, its object storage unreachable
            logger.error("%s", error)
            return EXIT_CONFIGURATION
        except (ValueError, RuntimeError) as error:
            logger.error("%s", error)
            return ExitCode.ERROR
        finally:
            if storage_child is not None:
                storage_child.stop()


def _own_storage_address(public: str) -> str:
    """Where the object storage server a scheduler starts binds: its public address, or, for a tunnel's (tls://,
    ws://, wss://), a private endpoint of the scheduler's relay, which serves the public address for it: the
    scheduler reaches its own server there, with no certificate check against a loopback name."""
    if not parse_address(public).is_tunnel:
        return public
    from scaler.io.tunnel.relay import relay

    return relay().private_endpoint()


def _serve_front(address: str, native: tuple[str, str, str], certificate: ServerCertificate | None) -> None:
    """Serve `--tunnel-address` in front of the scheduler's native addresses (they are bound a moment later: each
    connection made to the front reaches them when it comes)."""
    from scaler.io.tunnel.front import front_addresses, serve_front

    endpoints = tuple(str(parse_address(endpoint).connectable()) for endpoint in native)
    serve_front(address, (endpoints[0], endpoints[1], endpoints[2]), certificate)
    logger.info("also serving the scheduler, object storage and monitor at %s", ", ".join(front_addresses(address)))


def _serve_own_storage(public: str, endpoint: str, certificate: ServerCertificate | None) -> None:
    from scaler.io.tunnel.relay import relay

    relay().serve(parse_address(public), endpoint, certificate, "a scaler object storage server")


def policy_problem(config: SchedulerConfig) -> None:
    """Raise a ValueError naming what is wrong with the scheduler's policy settings (a misspelt policy or key):
    refused before anything starts, with exit code 2, by `scaler_scheduler` and by `scaler FILE`."""
    policy_config(config.policy_engine_type, config.policy_content)


#: The fields of `CoreSettings` that no setting declares (`core=` in `scaler.config.sections`): what the process
#: finds out at start. tests/unit/test_config_declarations.py checks that every other field is declared.
RUNTIME_CORE_FIELDS = frozenset(
    {"scheduler_address", "object_storage_address", "python_version", "allocate", "instance_id"}
)  # fmt: skip


def core_settings_of(
    config: SchedulerConfig, bind: str, advertised_storage: str, policy: ResolvedPolicy, *, instance_id: bytes
) -> CoreSettings:
    """The core's settings: every scheduler setting declared with `core=` (`fields.core_values`), and what only
    the process knows (`RUNTIME_CORE_FIELDS`)."""
    return CoreSettings(
        scheduler_address=bind,
        object_storage_address=advertised_storage,
        python_version=local_python_version(),
        allocate=policy.allocate,
        instance_id=instance_id,
        **core_values(config),
    )


def _serve(
    core: SchedulerCore,
    config: SchedulerConfig,
    bind: str,
    monitor: str,
    storage: str,
    storage_child: StorageChild | None,
    sockets: SocketFactory,
    served: ServedAddresses,
    signals: StartSignals,
) -> int:
    from scaler.scheduler.heap import Heap, refreeze
    from scaler.scheduler.server import SchedulerServer

    metrics = None
    if config.metrics_address:
        from scaler.monitor.metrics_server import MetricsServer

        try:
            metrics = MetricsServer(config.metrics_address)
        except (OSError, ValueError) as error:
            logger.error("cannot serve /metrics on %s: %s", config.metrics_address, error)
            return EXIT_CONFIGURATION
    server = SchedulerServer(
        core, bind, monitor, storage, sockets, metrics.on_publish if metrics else None, heap=Heap(freeze=refreeze)
    )
    set_collector_thresholds()
    loop = new_event_loop(config.event_loop)
    asyncio.set_event_loop(loop)
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, server.stop, f"received {signal.Signals(signum).name}")
    if signals.received is not None:  # arrived after the last wait, before the loop took the signals over
        server.stop(f"received {signals.received} while starting")
    watcher = None
    if storage_child is not None:
        watcher = loop.create_task(
            storage_child.watch(
                lambda reason: server.stop(reason, exit_code=ExitCode.ERROR), stopping=lambda: server.stopping
            )
        )

    def announce() -> None:  # once bound: never "listening" on a port another process holds
        logger.info("scheduler listening on %s (event loop: %s)", bind, config.event_loop)
        logger.info("monitor address is %s (scaler_top %s)", monitor, monitor)
        logger.info("object storage address is %s", storage)
        served.register()  # local clients, workers and tools find the keys for these addresses
        if metrics is not None:
            metrics.start()
            logger.info("metrics at %s", metrics.url)

    try:
        reason = loop.run_until_complete(server.run(on_bound=announce))
        (logger.error if server.exit_code else logger.info)("scheduler stopped: %s", reason)
        return server.exit_code
    except zmq.ZMQError as error:
        problems = [problem for problem in map(address_in_use_problem, (bind, monitor)) if problem]
        logger.error("could not bind %s", "; ".join(problems) or f"{bind} or {monitor}: {error.strerror}")
        return EXIT_CONFIGURATION
    finally:
        served.unregister()
        if metrics is not None:
            metrics.close()
        if watcher is not None:
            watcher.cancel()
            loop.run_until_complete(asyncio.gather(watcher, return_exceptions=True))
        close_loop(loop)
        asyncio.set_event_loop(None)


#: Objects made (less those freed) between two collections of the youngest generation in the scheduler process
#: (Python's default: 700). A young collection walks every young object still alive: a queue's tasks, and the tasks
#: workers hold, about five objects each (the record, its story, its entry on its link, ...), none of them in a cycle.
#: At 700 they cost about 7 us per tiny task in W1 re-walking a queue, at 10,000 about 3 us; and with 10,000 workers
#: holding 20,000 tasks, 10,000 still walks them all once per 20,000 tasks (35-48 ms, and a middle collection of
#: 165 ms every few: 2-3.5 us a task), where 150,000 walks none, the tasks ending first. A cycle's garbage waits
#: longer (MemoryReturn collects once a big queue has drained, and the idle freeze every ten minutes).
YOUNG_COLLECTION_ALLOCATIONS = 150_000
#: Young collections between two of the middle generation (Python's default: 10): a middle collection walks every
#: object that survived those, so young collections 15 times bigger come with fewer of them in one (a walk of at most
#: about 600,000 objects, where 10 of 10,000 made about 110,000). Only a heap that grows by that much without
#: freeing it (a big queue coming in) pays either walk: a pause of 60 ms at most for a young one, 250 ms for a middle.
MIDDLE_COLLECTION_YOUNG = 3


def set_collector_thresholds() -> None:
    """The scheduler process's collector: YOUNG_COLLECTION_ALLOCATIONS and MIDDLE_COLLECTION_YOUNG (the oldest
    generation's rule is Python's, and the freeze of `heap.py`)."""
    gc.set_threshold(YOUNG_COLLECTION_ALLOCATIONS, MIDDLE_COLLECTION_YOUNG, gc.get_threshold()[2])


#: How long the scheduler waits at start for an object storage server it was pointed at.
STORAGE_CHECK_SECONDS = 10.0
#: How long it waits silently: a server that answers later is waited for with a line saying so.
STORAGE_QUIET_SECONDS = 1.0


def _check_object_storage(address: str, security: TransportSecurity | None, between_tries: Callable[[], None]) -> None:
    """Say clearly at start when the object storage server cannot be reached (the scheduler still starts: the
    server may come up later; until then large arguments and results wait for it). A server that does not answer at
    once is waited for with a line saying so: the scheduler is not hung. What `between_tries` raises (a stop signal
    received meanwhile) ends the wait."""
    from scaler.object_storage.readiness import wait_for_object_storage

    connectable = str(parse_address(address).connectable())
    try:
        try:
            wait_for_object_storage(connectable, STORAGE_QUIET_SECONDS, security=security, between_tries=between_tries)
            return
        except RuntimeError:
            logger.info(
                "the object storage server at %s does not answer yet: waiting up to %g s more for it",
                address, STORAGE_CHECK_SECONDS - STORAGE_QUIET_SECONDS,
            )  # fmt: skip
        wait_for_object_storage(
            connectable, STORAGE_CHECK_SECONDS - STORAGE_QUIET_SECONDS, security=security, between_tries=between_tries
        )
    except RuntimeError as error:
        logger.warning(
            "%s; tasks whose arguments or results go through object storage will wait for it (start it with "
            "`scaler_object_storage_server %s`, or leave out --object-storage-address and the scheduler starts one)",
            error, address,
        )  # fmt: skip


def main() -> None:
    """`python -m scaler.scheduler.process '<SchedulerConfig as JSON>'`: how local clusters start a scheduler (on
    glibc's malloc: the module's first lines)."""
    import sys

    from scaler.config.logging_setup import setup_logging
    from scaler.io.process_profiling import run_profiled

    config = section_from_json(SchedulerConfig, sys.argv[1])
    setup_logging(config, "Scheduler")  # the seeds show "...: Scheduler: monitor address is ..."
    sys.exit(run_profiled("scheduler", lambda: run_scheduler(config)))


if __name__ == "__main__":
    main()
