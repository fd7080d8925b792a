"""Running one worker process from its settings: check them, fork the zygote, run the agent.

`python -m scaler.worker.process '<settings as JSON>'` is how pools and managers start workers (the
JSON is `dataclasses.asdict(WorkerConfig)`); `scaler_worker` is the command for people.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scaler.config.sections import NestedParents, WorkerConfig, section_from_json, section_to_json
from scaler.errors import PreloadError
from scaler.io.address import AddressError, parse_address
from scaler.io.event_loop import close_loop, new_event_loop
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.protocol.ids import new_worker_id
from scaler.worker.preload import check_preimport, parse_preload

if TYPE_CHECKING:
    from scaler.io.sockets import TransportSecurity
    from scaler.worker.executors.contract import Executor

logger = logging.getLogger(__name__)


def parse_worker_capabilities(text: str) -> tuple[tuple[str, int], ...]:
    from scaler.policy.capability import parse_capabilities

    return parse_capabilities(text)


def check_worker_config(config: WorkerConfig) -> str | None:
    """Why these settings cannot start a worker, or None."""
    try:
        parse_address(config.scheduler_address)
        if config.object_storage_address:
            parse_address(config.object_storage_address)
        parse_worker_capabilities(config.per_worker_capabilities)
        if config.preload:
            parse_preload(config.preload)
        check_preimport(config.preimport)
        NestedParents.named(config.nested_parents)
    except (AddressError, PreloadError, ValueError) as error:
        return str(error)
    return None


def run_worker(config: WorkerConfig, slots: int = 1, security: TransportSecurity | None = None) -> int:
    """A worker whose tasks run in processors forked from its zygote, `slots` at a time (the commands start
    one slot per worker process). `security`: how its connections are secured (None: the CURVE keys of its
    settings, if any)."""
    problem = check_worker_config(config)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    from scaler.io.tunnel.tls import TlsFileError
    from scaler.security.find import find_keys
    from scaler.security.key_files import KeyFileError
    from scaler.security.tls_settings import trust_settings

    try:
        security = security if security is not None else find_keys("worker", config.scheduler_address, config).security
        trust_settings(config)  # before the zygote is forked: its processors trust the same
    except (KeyFileError, TlsFileError) as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    from scaler.worker.computing_mark import marks_directory, remove_marks
    from scaler.worker.executors.zygote import Zygote, ZygoteExecutor
    from scaler.worker.processor.process import ProcessorSettings, run_processor

    worker_id = new_worker_id(config.worker_type or "FIX")
    processor_settings = ProcessorSettings(
        scheduler_address=config.scheduler_address,
        worker_id=worker_id,
        marks_directory=marks_directory(worker_id),
        max_staged_tasks=ZygoteExecutor.max_staged_tasks,
        preload=config.preload,
        garbage_collect_interval_seconds=config.garbage_collect_interval_seconds,
        storage_timeout_seconds=config.storage_timeout_seconds,
        trim_memory_threshold_bytes=config.trim_memory_threshold_bytes,
        security=security,
    )
    # Fork the zygote first: no thread, event loop or ZeroMQ context exists yet.
    from scaler.io.process_profiling import run_profiled

    try:
        zygote = Zygote.start(
            lambda processor_id, channel: run_profiled(
                "processor", lambda: run_processor(processor_settings, processor_id, channel)
            ),
            preimport=config.preimport,
        )
        executor = ZygoteExecutor(zygote)
        return run_agent(
            config, worker_id, executor, slots, security, processor_settings.marks_directory, route=config.host_cache
        )
    finally:
        remove_marks(processor_settings.marks_directory)


def _storage_router(config: WorkerConfig, security: TransportSecurity | None) -> Callable[[str], Any]:
    from scaler.worker.storage_route import route_storage

    settings: dict[str, object] = {
        "storage_timeout_seconds": config.storage_timeout_seconds,
        "logging_level": config.logging_level,
    }
    return lambda address: route_storage(address, security, settings)


def run_agent(
    config: WorkerConfig,
    worker_id: bytes,
    executor: Executor,
    slots: int,
    security: TransportSecurity | None = None,
    marks_directory: str = "",
    route: bool = False,
) -> int:
    """Run a worker agent until it exits: `slots` tasks at once on `executor` (zygote processors, or a remote
    system behind a proxy worker). Returns the worker's exit code. `marks_directory`: where its processors mark the
    task they compute (worker/computing_mark.py); "": they do not. `route`: its processors are processes of this host,
    which reach storage through the host's cache off the storage's host (worker/storage_route.py)."""
    if slots < 1:
        raise ValueError(f"a worker needs at least one slot, not {slots}")
    from scaler.io.sockets import SocketFactory
    from scaler.worker.agent import core as agent_core
    from scaler.worker.agent.shell import TICK_SECONDS, WorkerAgent, build_hello

    settings = agent_core.AgentSettings(
        scheduler_address=config.scheduler_address,
        slots=slots,
        max_held_tasks=config.per_worker_task_queue_size,
        heartbeat_interval_seconds=config.heartbeat_interval_seconds,
        death_timeout_seconds=config.death_timeout_seconds,
        scheduler_lost_grace_seconds=config.scheduler_lost_grace_seconds,
        task_timeout_seconds=config.task_timeout_seconds,
        object_storage_address=config.object_storage_address or "",
        route_storage=route,
        has_preload=bool(config.preload),
        processor_per_parent=NestedParents.named(config.nested_parents) is NestedParents.PROCESS,
        max_staged_tasks=executor.max_staged_tasks,
        pause_after_seconds=10 * TICK_SECONDS,  # ten ticks missed: the worker itself was stopped
        lifetime_seconds=config.lifetime_seconds,
        lifetime_drain_seconds=config.lifetime_drain_seconds,
        lifetime_started_at=_process_started_at(),
    )
    capabilities = parse_worker_capabilities(config.per_worker_capabilities)
    worker_core = agent_core.AgentCore(settings, time.monotonic(), processor_prefix=worker_id[-8:])
    hello = build_hello(capabilities, worker_core, config.worker_manager_id, config.worker_type or "FIX")
    sockets = SocketFactory(config.io_threads, security)  # only now: the zygote is forked from a process without one
    agent = WorkerAgent(
        worker_core,
        worker_id,
        config.scheduler_address,
        hello,
        executor,
        sockets,
        marks_directory=marks_directory,
        route_storage=_storage_router(config, security) if route else None,
    )
    from scaler.io.process_profiling import trace_memory_if_asked

    trace_memory_if_asked("agent")
    loop = new_event_loop(config.event_loop)
    from scaler.io.tunnel import TunnelError

    try:
        logger.info("worker %s connecting to %s", worker_id.decode(), config.scheduler_address)
        return loop.run_until_complete(agent.run())
    except TunnelError as error:  # a tls:// or wss:// scheduler refused for good (a certificate, a proxy)
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    finally:
        close_loop(loop)


def _process_started_at() -> float:
    """When this process started, on the monotonic clock (a worker's lifetime counts from it: a batch script that
    `exec`s the worker started when its job did)."""
    import psutil

    started: float = psutil.Process().create_time()
    return time.monotonic() - max(0.0, time.time() - started)


def worker_config_to_json(config: WorkerConfig) -> str:
    return section_to_json(config)


def main() -> None:
    config = section_from_json(WorkerConfig, sys.argv[1])
    from scaler.config.logging_setup import setup_logging

    setup_logging(config, "worker")
    from scaler.io.process_profiling import run_profiled

    sys.exit(run_profiled("worker", lambda: run_worker(config)))


if __name__ == "__main__":
    main()
