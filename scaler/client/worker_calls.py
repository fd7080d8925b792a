"""Calls that concern every worker rather than one task: `run` (a function once on each worker, Dask's
`Client.run`), `upload_file` (a module or package of the client's used by its tasks, Dask's `Client.upload_file`)
and `wait_for_workers` (until the scheduler has that many).

`run` has no message of its own: tasks cannot be sent to a worker by name, so it submits rounds of tasks, each round
enough to fill every worker; each task finds the worker it runs on (its processor's process among those the worker
reports, `cluster_view`) and runs the function only if it is the first of the run there (a marker file per run and
worker on that host, made with O_EXCL); one that is not holds its processor a moment, so that the round's other tasks
go to other workers. Rounds go on until every worker named has run it, or the timeout. The
tasks wait in the queue as others do: a run on a busy cluster starts when a processor of each worker is free.

`upload_file` gives the file's bytes to the client's task encoder: every function it stores from then on carries
them, and a processor makes them importable by name before it unpickles the function (`payload/uploads.py`), on
the workers running now and those that join later.
"""

from __future__ import annotations

import concurrent.futures
import os
import tempfile
import time
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaler.client import cluster_view
from scaler.client.session import Session
from scaler.payload.uploads import Upload, check

#: `on_error` of run: raise the first error, give it as that worker's result, or leave that worker out
RUN_ON_ERROR = ("raise", "return", "ignore")
#: How long run waits for every worker to have run the function, by default.
RUN_TIMEOUT_SECONDS = 120.0
#: The most tasks one round of a run submits.
MOST_TASKS_PER_ROUND = 256
#: How long a run's task on a worker that already ran the function holds its processor before it returns.
NOT_FIRST_PAUSE_SECONDS = 0.2
#: Markers of runs older than this are removed by the next run on the same host.
MARKER_KEEP_SECONDS = 3600.0
#: The suffixes upload_file takes.
UPLOADABLE = (".py", ".zip", ".egg", ".whl")
#: How often wait_for_workers looks at the session's worker count (the scheduler's status updates it).
WORKERS_POLL_SECONDS = 0.05

#: worker id -> (host name, agent pid, processor pids)
WorkerPlaces = dict[str, tuple[str, int, tuple[int, ...]]]


class _NotFirst:
    """What a run's task gives when the function already ran on its worker."""


_NOT_FIRST = _NotFirst()


def run_on_workers(
    session: Session,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    workers: list[str] | None = None,
    on_error: str = "raise",
    timeout_seconds: float = RUN_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """fn(*args, **kwargs) once on each worker (those named by `workers`, else every worker the scheduler knows
    now): {worker id: its result}. `on_error`: "raise" the first error, "return" it as the worker's result, or
    "ignore" (that worker is left out)."""
    if on_error not in RUN_ON_ERROR:
        raise ValueError(f"on_error must be one of {', '.join(RUN_ON_ERROR)}, not {on_error!r}")
    view = session.cluster_view()
    places = {w.worker_id: (w.hostname, w.pid, w.processor_pids) for w in view.workers}
    #: a round's tasks: enough to fill every worker, so that the scheduler gives each worker some
    per_round = min(MOST_TASKS_PER_ROUND, sum(w.capacity for w in view.workers) + 1)
    if workers is not None:
        unknown = sorted(set(workers) - set(places))
        if unknown:
            raise ValueError(f"run: no worker {', '.join(unknown)} (the workers now: {', '.join(sorted(places))})")
        places = {worker: places[worker] for worker in workers}
    run_id = uuid.uuid4().hex
    results: dict[str, Any] = {}
    errors: dict[str, BaseException] = {}
    deadline = time.monotonic() + timeout_seconds
    while set(places) - set(results) - set(errors):
        futures = [session.submit(_run_once, (run_id, places, fn, args, kwargs), {}) for _ in range(per_round)]
        done, not_done = concurrent.futures.wait(futures, timeout=max(0.0, deadline - time.monotonic()))
        session.cancel_futures(not_done)
        for future in done:
            _note(future, results, errors)
        if not_done or time.monotonic() > deadline:
            left = sorted(set(places) - set(results) - set(errors))
            raise TimeoutError(f"run: the function did not run on workers {', '.join(left)} in {timeout_seconds:g} s")
    if errors and on_error == "raise":
        raise next(iter(errors.values()))
    if on_error == "return":
        results.update(errors)
    return {worker: results[worker] for worker in places if worker in results}


def _note(future: concurrent.futures.Future[Any], results: dict[str, Any], errors: dict[str, BaseException]) -> None:
    if future.cancelled():
        return
    worker, outcome, error = future.result()
    if worker is None or isinstance(outcome, _NotFirst):
        return
    if error is not None:
        errors[worker] = error
    else:
        results[worker] = outcome


def _run_once(
    run_id: str, places: WorkerPlaces, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str | None, Any, BaseException | None]:
    """Runs in a task: (this worker's id, fn's result or _NOT_FIRST, fn's error). None for a worker not in
    `places` (one that joined since)."""
    worker = _this_worker(places)
    if worker is None:
        return None, _NOT_FIRST, None
    if not _first_on_worker(run_id, worker):
        time.sleep(NOT_FIRST_PAUSE_SECONDS)  # its worker takes no more of the round meanwhile: the others get them
        return worker, _NOT_FIRST, None
    try:
        return worker, fn(*args, **kwargs), None
    except Exception as error:
        return worker, None, error


def _this_worker(places: WorkerPlaces) -> str | None:
    pid, hostname = cluster_view.this_process()
    for worker, (host, _agent, processors) in places.items():
        if host == hostname and pid in processors:
            return worker
    import psutil  # here, on a worker: the client's own import needs no POSIX-only module (psutil imports `resource`)

    ancestors = {process.pid for process in psutil.Process(pid).parents()}
    for worker, (host, agent, _processors) in places.items():
        if host == hostname and agent in ancestors:
            return worker
    return None


def _first_on_worker(run_id: str, worker: str) -> bool:
    """Whether this task is the run's first on its worker: the marker of (run, worker) made now, not before."""
    folder = Path(tempfile.gettempdir()) / "scaler-run-markers"
    folder.mkdir(exist_ok=True)
    now = time.time()
    for old in folder.iterdir():
        try:
            if now - old.stat().st_mtime > MARKER_KEEP_SECONDS:
                old.unlink()
        except OSError:
            pass
    safe = "".join(character if character.isalnum() else "_" for character in worker)
    try:
        descriptor = os.open(folder / f"{run_id}-{safe}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(descriptor)
    return True


def upload_file(session: Session, filename: str | os.PathLike[str]) -> list[str]:
    """Make a `.py` module, or the packages and modules of a `.zip`, `.egg` or `.whl`, importable by name in this
    client's tasks from now on (see the module docstring). Returns the top-level names it provides; SyntaxError for
    a module that does not compile."""
    path = Path(filename)
    if path.suffix not in UPLOADABLE:
        raise ValueError(f"upload_file takes a {', '.join(UPLOADABLE)} file, not {path.name!r}")
    if not path.is_file():
        raise FileNotFoundError(f"upload_file: no file {str(path)!r}")
    upload = Upload(path.name, path.read_bytes())
    try:
        names = check(upload)
    except zipfile.BadZipFile as error:
        raise ValueError(f"upload_file: {path.name} is not a zip archive: {error}") from None
    session.upload(upload)
    return names


def wait_for_workers(session: Session, n_workers: int, timeout_seconds: float | None) -> None:
    """Until the scheduler has `n_workers` workers' processors connected; TimeoutError after `timeout_seconds` (None:
    no limit), ConnectionError when the session closes meanwhile."""
    if not isinstance(n_workers, int) or isinstance(n_workers, bool) or n_workers < 0:
        raise ValueError(f"n_workers must be a whole number >= 0, not {n_workers!r}")
    deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
    while session.worker_count < n_workers:
        session.check_open()
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(
                f"only {session.worker_count} of {n_workers} workers connected within {timeout_seconds:g} s"
            )
        time.sleep(WORKERS_POLL_SECONDS)
