"""Faults the fake cloud injects on request, as AWS would cause them, through one HTTP route next to moto's API:

    POST {AWS_ENDPOINT_URL}/scaler-fake-cloud/spot-interruption?resource=ID

- an ECS task ARN: a Fargate Spot interruption. From now on the task reads `stopCode` `SpotInterruption`,
  `stoppingAt` now and `stoppedReason` "Your Spot Task was interrupted.", its desired status is STOPPED and its
  container gets SIGTERM (then SIGKILL after the grace period), as ECS does at the two-minute warning;
- an AWS Batch job id: its spot host is reclaimed (the job fails with "Host EC2 (instance ...) terminated.").

The answer is 200 with what was done, 404 naming the resource when no running task or job has that id, 400
when `resource` is missing, and 501 for an EC2 instance id (the EC2 manager does not read spot warnings yet).
Everything else goes to moto.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

ROUTE = "/scaler-fake-cloud/spot-interruption"

#: resource id -> what was done, or None when this kind of resource has no such id
Injector = Callable[[str], str | None]


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
            return _answer(
                start_response, "400 Bad Request", f"{ROUTE}: give ?resource=<ECS task ARN or Batch job id>\n"
            )
        if resource.startswith("i-"):
            text = f"{resource}: EC2 spot interruptions are not injected yet (only ECS tasks and Batch jobs)\n"
            return _answer(start_response, "501 Not Implemented", text)
        for inject in chosen:
            done = inject(resource)
            if done is not None:
                return _answer(start_response, "200 OK", done + "\n")
        return _answer(start_response, "404 Not Found", f"no running ECS task or Batch job {resource!r}\n")

    return application


def _answer(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
    body = text.encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
