"""The object storage server a stack file implies: a `[scheduler]` that names an `object_storage_address` of this
machine where nothing listens, in a file with no `[object_storage_server]` section (docs/guide/clusters.md's
example), gets one started there by `scaler FILE`, with the scheduler's storage settings (memory budget, spill
directory, keys, logging), as `scaler_scheduler` starts its own when given no address. Without it, every call of
every client waited 10 s for a storage server nobody started.

An address of another machine, or one where something listens already, is left as it is: the scheduler checks it
at start and says so when it does not answer.
"""

from __future__ import annotations

import dataclasses

from scaler.config.loader import LauncherFile
from scaler.io.address import AddressError, parse_address
from scaler.io.port_owner import address_in_use_problem
from scaler.scheduler.storage_child import storage_settings_of
from scaler.security.connection_files import is_local_address


def with_implied_storage(file: LauncherFile) -> tuple[LauncherFile, str | None]:
    """The file with the object storage server it implies as its `[object_storage_server]`, and a line saying so
    (None, and the file unchanged, when it implies none)."""
    scheduler = file.scheduler
    if file.object_storage_server is not None or scheduler is None or scheduler.object_storage_address is None:
        return file, None
    address = scheduler.object_storage_address
    try:
        parsed = parse_address(address)
    except AddressError:
        return file, None  # the scheduler refuses it, naming it
    if not parsed.has_port or not is_local_address(address) or address_in_use_problem(address) is not None:
        return file, None
    storage = storage_settings_of(scheduler, address)
    # the budget and spill settings now belong to the server the file implies (the scheduler would warn that they
    # apply only to a server it starts itself)
    scheduler = dataclasses.replace(scheduler, object_storage_max_memory=None, object_storage_spill_directory=None)
    line = (
        f"[scheduler] object_storage_address is {address}, where nothing listens, and the file has no "
        "[object_storage_server]: starting one there"
    )
    return dataclasses.replace(file, object_storage_server=storage, scheduler=scheduler), line
