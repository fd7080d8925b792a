"""The API server's failures as it answers them: a `Status` object (kind Status, status Failure, a reason, a code
and a message in its own words), with the HTTP code of the same number."""

from __future__ import annotations

from typing import Any

from scaler_rehearsal.fake_kubernetes.kinds import Kind
from scaler_rehearsal.fake_kubernetes.validation import FieldError

Object = dict[str, Any]


class ApiFailure(Exception):
    def __init__(
        self, code: int, reason: str, message: str, details: Object | None = None, retry_after_seconds: int = 0
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after_seconds = retry_after_seconds

    def status(self) -> Object:
        status: Object = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


def _details(kind: Kind, name: str) -> Object:
    details: Object = {"name": name, "kind": kind.plural}
    if kind.group:
        details["group"] = kind.group
    return details


def not_found(kind: Kind, name: str) -> ApiFailure:
    return ApiFailure(404, "NotFound", f'{kind.qualified} "{name}" not found', _details(kind, name))


def already_exists(kind: Kind, name: str) -> ApiFailure:
    return ApiFailure(409, "AlreadyExists", f'{kind.qualified} "{name}" already exists', _details(kind, name))


def conflict(kind: Kind, name: str, why: str = "") -> ApiFailure:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiFailure(
        409, "Conflict", f'Operation cannot be fulfilled on {kind.qualified} "{name}": {why}', _details(kind, name)
    )


def invalid(kind: Kind, name: str, errors: list[FieldError]) -> ApiFailure:
    texts = [error.text() for error in errors]
    joined = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    details = _details(kind, name or "")
    details["kind"] = kind.kind
    details["causes"] = [{"reason": e.reason, "message": e.detail, "field": e.field} for e in errors]
    return ApiFailure(422, "Invalid", f'{kind.kind} "{name}" is invalid: {joined}', details)


def bad_request(message: str) -> ApiFailure:
    return ApiFailure(400, "BadRequest", message)


def forbidden(message: str, kind: Kind | None = None, name: str = "") -> ApiFailure:
    return ApiFailure(403, "Forbidden", message, _details(kind, name) if kind is not None else None)


def expired(message: str) -> ApiFailure:
    """What a watch or a list from a compacted resourceVersion gets."""
    return ApiFailure(410, "Expired", message)


def unauthorized() -> ApiFailure:
    return ApiFailure(401, "Unauthorized", "Unauthorized")


def method_not_allowed() -> ApiFailure:
    return ApiFailure(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def not_found_path() -> ApiFailure:
    return ApiFailure(404, "NotFound", "the server could not find the requested resource")


#: The failures the fault route can make the server answer, by HTTP code (reason, message).
INJECTED = {
    403: (
        "Forbidden",
        "pods is forbidden: exceeded quota: rehearsal, requested: pods=1, used: pods=0, limited: pods=0",
    ),
    409: (
        "Conflict",
        "Operation cannot be fulfilled: the object has been modified; please apply your changes to the "
        "latest version and try again",
    ),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
    500: ("InternalError", "Internal error occurred: the rehearsal was asked to fail this request"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
}


def injected(code: int) -> ApiFailure:
    reason, message = INJECTED.get(code, ("InternalError", f"the rehearsal was asked to answer {code}"))
    return ApiFailure(code, reason, message, retry_after_seconds=1 if code == 429 else 0)
