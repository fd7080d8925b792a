"""The lease of an `aws_hpc` job: the manager's proxy keeps an S3 object fresh (`LeaseKeeper`, in the proxy), and a
job whose lease object has not been renewed for its lease ends itself (`watch_lease`, in the job runner).

A Batch job runs one task and ends; what a laptop that disappears (SIGKILL, asleep, cut off) would otherwise leave
billed is a job still running its task, bounded only by the job timeout (an hour by default), and the jobs still
queued, which Batch would start later. With the lease, a job that starts after the lease ran out does not run its
task, and a running one exits within the lease plus its check interval (a minute at most). The job learns its lease
from the variables the proxy sets on it (`containerOverrides`), so the job definition does not change.

The age of the lease is S3's `LastModified` against the job's clock: both are the cloud's (NTP-synchronised), and a
second's skew is nothing against a lease of minutes.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

#: The variables a job's lease travels in.
LEASE_KEY_VARIABLE = "SCALER_LEASE_KEY"
LEASE_SECONDS_VARIABLE = "SCALER_LEASE_SECONDS"
#: The exit code of a job that ended because its lease ran out.
EXIT_LEASE_EXPIRED = 3
#: A running job looks at its lease at most this far apart (the "plus a minute").
MAX_CHECK_SECONDS = 60.0


def lease_age_beyond(renewed: datetime.datetime | None, now: datetime.datetime, lease_seconds: float) -> str | None:
    """Why the lease last renewed at `renewed` (None: no lease object) no longer holds at `now`, or None."""
    if renewed is None:
        return "its lease object is gone (the manager stopped)"
    age = (now - renewed).total_seconds()
    if age <= lease_seconds:
        return None
    return f"its lease was last renewed {age:.0f} s ago, more than its {lease_seconds:g} s (the manager is gone)"


def check_interval(lease_seconds: float) -> float:
    return max(1.0, min(MAX_CHECK_SECONDS, lease_seconds / 4))


class LeaseKeeper:
    """The proxy's side: one lease object per backend (at `where`, "bucket/key"), written again by `write` whenever a
    quarter of the lease has passed."""

    def __init__(self, where: str, lease_seconds: float, write: Callable[[], None]) -> None:
        self.where, self.lease_seconds, self._write = where, lease_seconds, write
        self._renewed_at: float | None = None
        self._lock = threading.Lock()

    def variables(self) -> list[dict[str, str]]:
        """What a job is given (`containerOverrides.environment`)."""
        return [{"name": LEASE_KEY_VARIABLE, "value": self.where},
                {"name": LEASE_SECONDS_VARIABLE, "value": f"{self.lease_seconds:g}"}]  # fmt: skip

    def renew(self, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if not force and self._renewed_at is not None and now - self._renewed_at < self.lease_seconds / 4:
                return
            self._write()
            self._renewed_at = now


def watch_lease(s3: Any, job_id: str, on_expired: Callable[[], None] | None = None) -> str | None:
    """The job's side: None when the job has no lease or its lease holds (a daemon thread then keeps checking and
    ends the process when it runs out); else why the job must not run its task."""
    where, seconds = os.environ.get(LEASE_KEY_VARIABLE), os.environ.get(LEASE_SECONDS_VARIABLE)
    if not where or not seconds:
        return None
    bucket, key = where.split("/", 1)
    lease_seconds = float(seconds)

    def expired() -> str | None:
        try:
            renewed = s3.head_object(Bucket=bucket, Key=key)["LastModified"]
        except Exception as error:  # missing object (404) or no access: the lease cannot be shown to hold
            if "404" not in str(error) and "Not Found" not in str(error):
                return f"its lease s3://{where} cannot be read: {error}"
            renewed = None
        return lease_age_beyond(renewed, datetime.datetime.now(datetime.timezone.utc), lease_seconds)

    reason = expired()
    if reason is not None:
        return reason

    def keep_watching() -> None:
        while True:
            time.sleep(check_interval(lease_seconds))
            why = expired()
            if why is not None:
                print(f"job {job_id}: stopping: {why}", file=sys.stderr, flush=True)
                (on_expired or (lambda: os._exit(EXIT_LEASE_EXPIRED)))()
                return

    threading.Thread(target=keep_watching, name="lease-watch", daemon=True).start()
    return None
