"""Concurrent requests to the fake cloud answered as each would be alone.

moto lets a request choose fields of its answer (ECS `describe_tasks` with `include=["TAGS"]`, the same for clusters,
services and task sets, EC2's key pairs) by writing the choice into a dict of its response *class*, shared by every
request the server is answering at that moment: a `describe_tasks` without `include` made while another with it was
being answered took the task tags out of that other answer. A manager that lists its units by their tags then missed
a live unit, and a launcher concluded that its hub had ended. Here each request writes its choice into a copy of its
own.

`install()` patches moto's response class and returns what undoes it (`FakeCloud.stop`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Where moto keeps the field choices (per response class; per request once installed).
TRANSFORMERS = "RESPONSE_KEY_PATH_TO_TRANSFORMER"


def install() -> Callable[[], None]:
    from moto.core.responses import BaseResponse

    original_include = BaseResponse.__dict__["_include_in_response"]
    original_exclude = BaseResponse.__dict__["_exclude_from_response"]
    BaseResponse._include_in_response = _include_in_response  # type: ignore[method-assign, assignment]
    BaseResponse._exclude_from_response = _exclude_from_response  # type: ignore[method-assign, assignment]

    def undo() -> None:
        BaseResponse._include_in_response = original_include  # type: ignore[method-assign]
        BaseResponse._exclude_from_response = original_exclude  # type: ignore[method-assign]

    return undo


def _include_in_response(response: Any, key_path: str) -> None:
    _own_choices(response)[key_path] = _unchanged


def _exclude_from_response(response: Any, key_path: str) -> None:
    from moto.core.serialize import never_return

    _own_choices(response)[key_path] = never_return


def _own_choices(response: Any) -> dict[str, Callable[[Any], Any]]:
    """The request's own copy of its response class's field choices (moto makes one response object per request,
    and its serializer reads the choices from that object)."""
    own: dict[str, Callable[[Any], Any]] | None = vars(response).get(TRANSFORMERS)
    if own is None:
        own = dict(getattr(type(response), TRANSFORMERS))
        setattr(response, TRANSFORMERS, own)
    return own


def _unchanged(value: Any) -> Any:
    return value
