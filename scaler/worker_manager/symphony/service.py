"""The Symphony side of `scaler_worker_manager symphony`: the service every offloaded task runs in.

Deploy this module as the service of the Symphony application that `--service-name` names, started as
`python -m scaler.worker_manager.symphony.service` by a Python with scaler installed (same Python and scaler
versions as the manager, plus the modules the tasks import). Each task input is a task bundle
(payload/remote_bundle.py); the service runs it with `run_bundle`, the same TaskExecutor a local worker uses,
and answers the outcome as the task output. A task's own exception is part of its outcome; only a bundle it
cannot read fails the Symphony task.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from scaler.worker.task_execution import run_bundle
from scaler.worker_manager.offload.backend import OffloadError
from scaler.worker_manager.symphony.soam_backend import load_soamapi, payload_message_class


def service_container_class(soamapi: ModuleType) -> type[Any]:
    """The `soamapi.ServiceContainer` subclass (built once soamapi is imported: it is not on every machine)."""
    message_class = payload_message_class(soamapi)

    # soamapi is imported at run time: mypy cannot know this base class
    class ScalerServiceContainer(soamapi.ServiceContainer):  # type: ignore[misc,name-defined]
        def on_create_service(self, service_context: Any) -> None:
            return

        def on_session_enter(self, session_context: Any) -> None:
            return

        def on_invoke(self, task_context: Any) -> None:
            task_input = message_class()
            task_context.populate_task_input(task_input)
            task_context.set_task_output(message_class(run_bundle(task_input.payload)))

        def on_session_leave(self) -> None:
            return

        def on_destroy_service(self) -> None:
            return

    return ScalerServiceContainer


def main() -> None:
    try:
        soamapi = load_soamapi()
    except OffloadError as error:
        print(error, file=sys.stderr)
        sys.exit(2)
    service_container_class(soamapi)().run()


if __name__ == "__main__":
    main()
