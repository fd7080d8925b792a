"""Which task a processor computes, written where its agent reads it after the processor died (docs/architecture.md,
"One route"; docs/protocol.md section 3.7).

A processor's agent never sees its tasks (they come on the processor's own link), so when the processor dies the
scheduler must be told which one was computing: the one whose result was merely handed to the processor's ZeroMQ I/O
thread died with it too, and is not to blame. Each processor maps a small file of its own in a directory its worker
made (`marks_directory`, in /dev/shm where it can): before a task computes, the processor writes its id there
(`ComputingMark.computing`), and clears it once the result is handed over or the task parks (`done`). Both are stores
into shared memory, no system call. When the processor ends, the agent reads the file (`read_mark`) and names the task
in ProcessorExited; while it lives, the agent reads it for the processor's state in its heartbeat and for the memory
it samples (`computing_task`).

The layout: byte 0 is the id's length (0: nothing computes; 255: an id too long to write, unknown), then the id. The
id is written before its length, so a processor killed between the two leaves the previous length, 0 (it is cleared
before each new id): nothing computed, never a torn id.
"""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile
import threading

#: The file's size: a length byte and an id of up to 254 bytes (task ids are 16).
MARK_BYTES = 256
_UNKNOWN = 255


_PREFIX = "scaler-marks-"


def marks_directory(worker_id: bytes) -> str:
    """A directory for the marks of a worker's processors: in /dev/shm (memory) when there is one, else the temporary
    directory, named after the worker's pid. The caller removes it (`remove_marks`); those of workers that died
    without removing theirs (SIGKILL) are removed here, once their pid is gone."""
    shm = "/dev/shm"
    parent = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()
    _remove_orphans(parent)
    suffix = worker_id[-8:].decode(errors="replace").replace("/", "_")
    return tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-{suffix}-", dir=parent)


def _remove_orphans(parent: str) -> None:
    try:
        names = [name for name in os.listdir(parent) if name.startswith(_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_marks(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def _path(directory: str, processor_id: bytes) -> str:
    return os.path.join(directory, processor_id.hex())


class ComputingMark:
    """The processor's side: its mark, mapped once."""

    def __init__(self, directory: str, processor_id: bytes) -> None:
        fd = os.open(_path(directory, processor_id), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, MARK_BYTES)
            self._map = mmap.mmap(fd, MARK_BYTES)
        finally:
            os.close(fd)
        self._lock = threading.Lock()  #: `done` clears only its own task's mark, whatever another thread wrote
        self._task: bytes = b""

    def computing(self, task_id: bytes) -> None:
        """This task computes now."""
        with self._lock:
            view = self._map
            view[0] = 0
            if len(task_id) < _UNKNOWN:
                view[1 : 1 + len(task_id)] = task_id
                view[0] = len(task_id)
            else:
                view[0] = _UNKNOWN
            self._task = task_id

    def done(self, task_id: bytes) -> None:
        """This task computes no more (its result was handed over, or it parked)."""
        with self._lock:
            if self._task == task_id:
                self._map[0] = 0
                self._task = b""

    def close(self) -> None:
        self._map.close()


def computing_task(directory: str, processor_id: bytes) -> bytes:
    """The agent's side, while the processor lives: the task it computes now (b"": none, or not known). One read."""
    try:
        with open(_path(directory, processor_id), "rb") as file:
            data = file.read(MARK_BYTES)
    except OSError:
        return b""
    if not data or data[0] in (0, _UNKNOWN) or len(data) < 1 + data[0]:
        return b""
    return data[1 : 1 + data[0]]


def read_mark(directory: str, processor_id: bytes) -> bytes | None:
    """The agent's side, once the processor ended: the task it computed (b"": none), or None when that is not known (no
    mark: it died before it made one, or the id was too long). The file is removed."""
    path = _path(directory, processor_id)
    try:
        with open(path, "rb") as file:
            data = file.read(MARK_BYTES)
    except OSError:
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    if not data or data[0] == _UNKNOWN or len(data) < 1 + data[0]:
        return None
    return data[1 : 1 + data[0]]
