"""A unit's boot report: one small JSON object the unit writes to the manager's bucket through a presigned URL
(the only thing a unit can send its manager: nothing on the laptop listens), read by the manager on its next
listing. It says how far the unit got (`state`), how long it took, and what went wrong."""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

logger = logging.getLogger(__name__)

#: Where a unit's program finds its report URL and unit id (set by `boot`).
REPORT_URL_VARIABLE = "SCALER_UNIT_REPORT_URL"
REPORT_VARIABLE = "SCALER_UNIT_REPORT"  #: the report so far (JSON), which the program's own reports carry on
#: States, in order: `started` (the program runs; it reports `running` itself), `running`, `unreachable` (its
#: scheduler cannot be reached from the unit); `failed` and `ended` are final.
STATES = ("installing", "starting", "started", "running", "unreachable", "failed", "ended")
HTTP_TIMEOUT_SECONDS = 20.0


def reachable_url(url: str) -> str:
    """A presigned URL made by a manager talking to a local AWS endpoint (`AWS_ENDPOINT_URL` on 127.0.0.1, the
    fake cloud) points at the unit's own endpoint when the unit is told another one: the same service, seen from
    the unit's network. Any other URL is used as it is."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    parsed = urllib.parse.urlsplit(url)
    if not endpoint or parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        return url
    mine = urllib.parse.urlsplit(endpoint)
    return urllib.parse.urlunsplit((mine.scheme, mine.netloc, parsed.path, parsed.query, parsed.fragment))


def http(method: str, url: str, body: bytes | None = None, timeout: float = HTTP_TIMEOUT_SECONDS) -> bytes:
    request = urllib.request.Request(reachable_url(url), data=body, method=method)
    if body is not None:
        request.add_header("Content-Type", "application/octet-stream")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        data: bytes = response.read()
        return data


class UnitReporter:
    """Writes the unit's report; every write carries everything known so far (the manager reads the last)."""

    def __init__(self, url: str | None, **fields: Any) -> None:
        self._url = url
        self.fields: dict[str, Any] = dict(fields)

    @classmethod
    def from_environment(cls) -> UnitReporter:
        """The report of the unit this program runs on, as its boot left it."""
        try:
            fields = json.loads(os.environ.get(REPORT_VARIABLE, "{}"))
        except ValueError:
            fields = {}
        return cls(os.environ.get(REPORT_URL_VARIABLE), **(fields if isinstance(fields, dict) else {}))

    def send(self, **fields: Any) -> None:
        self.fields.update(fields, updated_at=time.time())
        if not self._url:
            return
        try:
            http("PUT", self._url, json.dumps(self.fields).encode())
        except (OSError, urllib.error.URLError) as error:  # a bucket deleted mid-burst: the unit goes on
            logger.warning("could not write the unit's boot report: %s", error)
