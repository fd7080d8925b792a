"""Faults the fake cloud injects on request, as AWS would cause them, through one HTTP route next to moto's API:

    POST {AWS_ENDPOINT_URL}/scaler-fake-cloud/spot-interruption?resource=ID

- an ECS task ARN: a Fargate Spot interruption. From now on the task reads `stopCode` `SpotInterruption`,
  `stoppingAt` now and `stoppedReason` "Your Spot Task was interrupted.", its desired status is STOPPED and its
  container gets SIGTERM (then SIGKILL after the grace period), as ECS does at the two-minute warning;
- an EC2 spot instance id: the instance's spot request gives EC2's two-minute warning (status
  `instance-terminated-no-capacity`, updated now) and the instance runs on through the notice
  (`scaler_fake_cloud --spot-notice-seconds`, 120 by default), then EC2 terminates it ("Service initiated",
  `Server.SpotInstanceTermination`; its processes get SIGTERM, then SIGKILL after the grace period);
- an AWS Batch job id: its spot host is reclaimed (the job fails with "Host EC2 (instance ...) terminated.").

The answer is 200 with what was done, 404 naming the resource when nothing has that id, 409 naming why when
it cannot be interrupted (an on-demand instance, one that is not running, one already interrupted), and 400
when `resource` is missing. Everything else goes to moto.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

ROUTE = "/scaler-fake-cloud/spot-interruption"

#: resource id -> what was done, or None when this kind of resource has no such id (or `FaultRefused`)
Injector = Callable[[str], str | None]


class FaultRefused(Exception):
    """The resource exists but cannot take the fault; the message says why."""


def with_fault_route(moto_app: Any, injectors: Iterable[Injector]) -> Callable[..., Iterable[bytes]]:
    """A WSGI application that answers `ROUTE` with the first injector that knows the resource."""
    chosen = tuple(injectors)

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != ROUTE:
            result: Iterable[bytes] = moto_app(environ, start_response)
            return result
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start_response, "405 Method Not Allowed", f"{ROUTE} takes POST\n")
        resource = parse_qs(environ.get("QUERY_STRING", "")).get("resource", [""])[0].strip()
        if not resource:
            text = f"{ROUTE}: give ?resource=<ECS task ARN, EC2 instance id or Batch job id>\n"
            return _answer(start_response, "400 Bad Request", text)
        for inject in chosen:
            try:
                done = inject(resource)
            except FaultRefused as refused:
                return _answer(start_response, "409 Conflict", f"{refused}\n")
            if done is not None:
                return _answer(start_response, "200 OK", done + "\n")
        text = f"no running ECS task, EC2 instance or Batch job {resource!r}\n"
        return _answer(start_response, "404 Not Found", text)

    return application


def _answer(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
    body = text.encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
