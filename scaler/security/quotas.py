"""Per-key shares and quotas, set by the administrator next to the authorised keys (docs/guide/sharing.md).

`FOLDER/sharing.toml` holds one table per key, named like its key file (`alice` for `alice.key`, at the top of the
folder or in a role subfolder):

    [alice]
    share = 3                 # alice's clients get share 3, whatever they ask for
    max_running_tasks = 200   # and at most this quota (a client may ask for less)
    max_workers = 4           # and at most 4 workers' worth of spend (a client may ask for less)
    max_cost_per_hour = 2.5   # its part of the cost policy's budget (without: a part by its share)
    max_job_result_bytes = 1_000_000_000  # the results its jobs keep at once (without: the scheduler's quota)

A client that registers with that key gets the share written here, so a user cannot raise their own weight. The
file is read with the folder, again whenever it changes; a broken file is refused at start and, later, leaves the
previous settings in force.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaler.security.roles import ROLE_FOLDERS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SHARING_FILE = "sharing.toml"
#: what a key's table may set
SETTINGS = ("share", "max_running_tasks", "max_workers", "max_cost_per_hour", "max_job_result_bytes")


@dataclass(frozen=True, slots=True)
class KeySharing:
    share: float | None = None  #: replaces the share a client of this key asks for
    max_running_tasks: int | None = None  #: the most a client of this key may ask for
    max_workers: int | None = None  #: the most workers' worth of spend a client of this key may ask for
    max_cost_per_hour: float | None = None  #: its part of the cost policy's budget (None: a part by its share)
    max_job_result_bytes: int | None = None  #: the results its jobs keep at once (None: the scheduler's quota)


def key_sharing(folder: str, read_public_key: Callable[[str], bytes]) -> dict[bytes, KeySharing]:
    """Public key -> its sharing settings, from `FOLDER/sharing.toml` (none when there is no such file); a
    ValueError naming the file and the entry when it is wrong."""
    top = Path(folder)
    path = top / SHARING_FILE
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as file:
            document = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: cannot read it ({error})") from None
    places = [top, *(top / name for name in ROLE_FOLDERS)]
    found: dict[bytes, KeySharing] = {}
    for name, entry in document.items():
        key_file = next((place / f"{name}.key" for place in places if (place / f"{name}.key").is_file()), None)
        if key_file is None:
            raise ValueError(f"{path}: [{name}] names no key file ({name}.key) in {folder} or its role folders")
        if not isinstance(entry, dict) or set(entry) - set(SETTINGS):
            raise ValueError(f"{path}: [{name}] may hold only {', '.join(SETTINGS)}")
        quotas = (_quota(path, name, entry, "max_running_tasks"), _quota(path, name, entry, "max_workers"))
        budget = _positive(path, name, entry, "max_cost_per_hour")
        storage = _quota(path, name, entry, "max_job_result_bytes", 2**63)
        found[read_public_key(str(key_file))] = KeySharing(
            _positive(path, name, entry, "share"), *quotas, budget, storage
        )
    return found


def _positive(path: Path, name: str, entry: dict[str, Any], setting: str) -> float | None:
    value = entry.get(setting)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{path}: [{name}] {setting} must be a positive number, not {value!r}")
    return float(value)


def _quota(path: Path, name: str, entry: dict[str, Any], setting: str, bound: int = 2**32) -> int | None:
    quota = entry.get(setting)
    if quota is None:
        return None
    if isinstance(quota, bool) or not isinstance(quota, int) or not 0 < quota < bound:
        raise ValueError(f"{path}: [{name}] {setting} must be a positive integer, not {quota!r}")
    return quota
