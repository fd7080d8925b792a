"""Ray's `ray.get_runtime_context()`: the ids of the job, node, task and actor the caller runs in, and a handle on
that actor. Above both `ray_runtime` (what the running call carried) and `ray_actors` (the actor's handle)."""

from __future__ import annotations

import os
import socket
import warnings
from typing import Any

from scaler.compat.ray_actors import handle_of_running_actor
from scaler.compat.ray_runtime import job_id_of_caller, node_id_of, task_info
from scaler.compat.ray_session import current
from scaler.payload import processor_context


class _ID:
    """What Ray's deprecated id attributes give: an id with `.hex()`."""

    def __init__(self, text: str) -> None:
        self.text = text

    def hex(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ID) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"ID({self.text})"


class RuntimeContext:
    """Ray's `ray.get_runtime_context()`: the ids of the job, node, task and actor the caller runs in."""

    def get_job_id(self) -> str:
        return job_id_of_caller()

    def get_node_id(self) -> str:
        return node_id_of(socket.gethostname())

    def get_task_id(self) -> str | None:
        """The running task's id (None in the driver); in an actor, its id (scaler runs an actor's calls as it)."""
        task = processor_context.running_task_id()
        return task.hex() if task and task_info() is not None else None

    def get_actor_id(self) -> str | None:
        info = task_info()
        if info is None or info.actor_name is None:
            return None
        return processor_context.running_task_id().hex()

    def get_actor_name(self) -> str | None:
        info = task_info()
        return None if info is None else info.actor_name

    def get_task_name(self) -> str | None:
        info = task_info()
        return None if info is None else info.task_name

    def get_assigned_resources(self) -> dict[str, float]:
        """What the running task or actor asked for (a task: 1 CPU by default; an actor: none unless asked)."""
        info = task_info()
        return {} if info is None else dict(info.resources)

    def get_worker_id(self) -> str:
        return f"{os.getpid():x}-{socket.gethostname()}"

    @property
    def namespace(self) -> str:
        return "default"

    @property
    def was_current_actor_reconstructed(self) -> bool:
        """Not known here: scaler builds a lost actor again elsewhere without telling it (False)."""
        return False

    @property
    def current_actor(self) -> Any:
        """A handle on the actor the caller runs in."""
        actor_id = self.get_actor_id()
        if actor_id is None:
            raise RuntimeError("This method is only available in an actor.")
        return handle_of_running_actor(bytes.fromhex(actor_id))

    def get(self) -> dict[str, Any]:
        """Ray's dict form: job_id and node_id always, task_id in a task, actor_id in an actor."""
        found: dict[str, Any] = {"job_id": _ID(self.get_job_id()), "node_id": _ID(self.get_node_id())}
        task_id = self.get_task_id()
        if task_id is not None:
            found["task_id"] = _ID(task_id)
        actor_id = self.get_actor_id()
        if actor_id is not None:
            found["actor_id"] = _ID(actor_id)
        return found

    def _deprecated(self, name: str, value: str | None) -> _ID | None:
        warnings.warn(f"Use get_{name}() instead", DeprecationWarning, stacklevel=3)
        return None if value is None else _ID(value)

    @property
    def job_id(self) -> _ID | None:
        return self._deprecated("job_id", self.get_job_id())

    @property
    def node_id(self) -> _ID | None:
        return self._deprecated("node_id", self.get_node_id())

    @property
    def task_id(self) -> _ID | None:
        return self._deprecated("task_id", self.get_task_id())

    @property
    def actor_id(self) -> _ID | None:
        return self._deprecated("actor_id", self.get_actor_id())


def get_runtime_context() -> RuntimeContext:
    """The context of the caller (starting the session first, as Ray's does)."""
    current()
    return RuntimeContext()
