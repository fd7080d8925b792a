"""The native backend's memory of its units, kept on disk so that a restarted manager adopts them.

One small JSON file per unit in a directory per (manager id, scheduler address, network namespace) under the
system's temporary directory. A record names the unit's process by pid *and* start time, so a pid reused by
an unrelated process after a reboot or a long time is never taken for the unit.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

_SUFFIX = ".json"


@dataclass(frozen=True, slots=True)
class UnitRecord:
    unit_id: str
    manager_id: str
    pid: int  #: the worker agent; it leads the unit's process group (a new session)
    process_started: float  #: the process's start time (psutil create_time), to tell it from a reused pid
    created_at: float  #: wall-clock time of the launch


def state_directory_for(manager_id: str, scheduler_address: str, root: Path | None = None) -> Path:
    """`<tmp>/scaler-worker-managers-<uid>/<manager id>-<hash>`: one per manager id and scheduler. The scheduler is
    its address in this network namespace: a stack in another namespace (a container, `ip netns`) that shares the
    temporary folder and has the same address and manager id is another scheduler, whose units are not ours to
    adopt or stop."""
    if root is None:
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
        root = Path(tempfile.gettempdir()) / f"scaler-worker-managers-{user}"
    namespace = network_namespace()
    scheduler = f"{scheduler_address}\n{manager_id}" + (f"\n{namespace}" if namespace else "")
    digest = hashlib.sha256(scheduler.encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9_.]", "_", manager_id)[:40]
    return root / f"{readable}-{digest}"


def network_namespace() -> str:
    """This process's network namespace (`net:[4026531840]` on Linux), or "" where it cannot be told."""
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return ""


class UnitRecords:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def save(self, record: UnitRecord) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._path(record.unit_id)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(record)))
        os.replace(temporary, path)

    def remove(self, unit_id: str) -> None:
        try:
            self._path(unit_id).unlink()
        except FileNotFoundError:
            pass

    def load_all(self) -> list[UnitRecord]:
        try:
            paths = sorted(self.directory.glob(f"*{_SUFFIX}"))
        except OSError:
            return []
        records = []
        for path in paths:
            try:
                records.append(UnitRecord(**json.loads(path.read_text())))
            except FileNotFoundError:  # removed meanwhile by another instance
                continue
            except (OSError, ValueError, TypeError) as error:
                logger.warning("ignoring unreadable unit record %s: %s", path, error)
        return records

    def remove_directory_if_empty(self) -> None:
        try:
            self.directory.rmdir()
        except OSError:
            pass

    def _path(self, unit_id: str) -> Path:
        return self.directory / f"{unit_id}{_SUFFIX}"
