"""A host cache's reports to its storage server (`hostReport`: what it holds and moves, ledger.py L3): a thread with a
connection of its own, so that a report never waits behind the fetches, uploads and checks of the upstream threads.
Every REPORT_SECONDS it asks the event loop for the report that is due (None: none is) and sends it; a storage server
that cannot be reached or refuses it is said once in the log, and the next report tries again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from scaler.errors import ObjectStorageException
from scaler.io.sockets import TransportSecurity
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.protocol.storage_messages import HostReport

logger = logging.getLogger(__name__)

#: How often a report is considered (one is sent only when it is due: ledger.py, L3).
REPORT_SECONDS = 1.0


class Reporter:
    """`due()` runs on the event loop's thread (through `on_loop`) and gives the report to send, or None."""

    def __init__(
        self,
        address: str,
        due: Callable[[], HostReport | None],
        on_loop: Callable[[Callable[[], Any]], Any],
        security: TransportSecurity | None = None,
        timeout_seconds: float = 60.0,
        own_address: str = "",
        period_seconds: float = REPORT_SECONDS,
    ) -> None:
        self._address = address
        self._due = due
        self._on_loop = on_loop
        self._security = security
        self._timeout_seconds = timeout_seconds
        self._own_address = own_address
        self._period_seconds = period_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scaler-cache-reporter", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        connection = ObjectStorageConnection(
            self._address, role="cache", timeout_seconds=self._timeout_seconds, security=self._security,
            map_local=False, cache_address=self._own_address,
        )  # fmt: skip
        failing = False
        try:
            while not self._stop.wait(self._period_seconds):
                try:
                    report = self._on_loop(self._due)
                    if report is not None:
                        connection.call(report)
                except (ObjectStorageException, OSError, TimeoutError) as error:
                    if not failing:
                        logger.warning(
                            "host cache: its report to the storage server at %s failed (%s): trying again with the "
                            "next one (said once until one succeeds)", self._address, error,
                        )  # fmt: skip
                    failing = True
                    continue
                if failing:
                    logger.info("host cache: its reports reach the storage server at %s again", self._address)
                failing = False
        finally:
            connection.close()
