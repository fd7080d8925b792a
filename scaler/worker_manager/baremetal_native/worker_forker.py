"""The native manager's worker forker: a fork server (`scaler.io.fork_server`) that has the worker's
modules imported and forks one worker process per request.

    python -m scaler.worker_manager.baremetal_native.worker_forker FD '<the manager's WorkerConfig as JSON>'

A dynamic manager starts it once, as a fresh interpreter (never a fork of the manager, which may have
threads by then), and from then on a new worker costs a fork instead of a Python start-up: eight workers
asked for at once on a two-core machine are ready in tens of milliseconds instead of more than a second.
The JSON argument is the manager's worker settings; it is there for `ps` (which scheduler and manager this
serves, also shown by the forked workers, which share the forker's command line). Each request carries the
unit's own settings as JSON; the forked worker leads a new session and names itself `w-<unit id>`
(`worker_process_name`), which is how a restarted manager recognises it.
"""

from __future__ import annotations

import socket
import sys

from scaler.config.sections import WorkerConfig, section_from_json, section_to_json
from scaler.io.child_processes import name_this_process, start_python_child
from scaler.io.fork_server import ForkServer, serve_forks, socket_pair


def worker_process_name(unit_id: str) -> str:
    """The process name (at most 15 bytes) of a unit's forked worker agent."""
    return f"w-{unit_id}"


def start_worker_forker(worker: WorkerConfig) -> ForkServer:
    """Start the forker as a child of this process (it dies with it; the workers it forked do not)."""
    owner_end, server_end = socket_pair()
    try:
        process = start_python_child([__name__, str(server_end.fileno()), section_to_json(worker)],
                                     pass_fds=[server_end.fileno()])  # fmt: skip
    finally:
        server_end.close()
    return ForkServer(owner_end, process.pid, process)


def _run_worker(unit_id: bytes, payload: bytes, _sockets: list[socket.socket]) -> int:
    from scaler.config.logging_setup import setup_logging
    from scaler.io.process_profiling import run_profiled
    from scaler.worker.process import run_worker

    config = section_from_json(WorkerConfig, payload.decode())
    setup_logging(config, "worker")
    return run_profiled("worker", lambda: run_worker(config))


def main() -> None:
    server_end = socket.socket(fileno=int(sys.argv[1]))
    name_this_process("scaler-forker")
    # What a worker imports, loaded once here instead of in every worker.
    import scaler.config.logging_setup
    import scaler.io.process_profiling
    import scaler.worker.agent.shell
    import scaler.worker.process
    import scaler.worker.processor.process  # noqa: F401

    sys.exit(
        serve_forks(
            server_end,
            _run_worker,
            child_name=lambda unit_id: worker_process_name(unit_id.decode()),
            detached=True,
        )
    )


if __name__ == "__main__":
    main()
