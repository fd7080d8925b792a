"""The reference's `Processor`, as the libraries of its family use it: `Processor.get_current_processor()` tells code
whether it runs inside a task, and which scheduler its nested tasks go to (parfun's Scaler backend asks it, and with
`use_worker_client=True` submits there). A thin view of this processor's own context
(`scaler.payload.processor_context`); nothing here runs a processor (`scaler.worker.processor` does).

Outside a task `get_current_processor()` is None, as in the reference; a `Processor` is only made by it."""

from __future__ import annotations

from scaler.payload import processor_context
from scaler.payload.processor_context import ProcessorContext

__all__ = ["Processor"]


class Processor:
    """The processor the calling code's task runs in."""

    __slots__ = ("_context",)

    def __init__(self, context: ProcessorContext) -> None:
        self._context = context

    @staticmethod
    def get_current_processor() -> Processor | None:
        """The processor running the calling code's task; None outside a task."""
        context = processor_context.current()
        return None if context is None else Processor(context)

    def scheduler_address(self) -> str:
        """The address of the scheduler its worker is connected to (a `Client()` made in the task connects there)."""
        return self._context.scheduler_address

    def object_storage_address(self) -> str:
        """The address of the object storage it reads and writes ("" until its worker has configured it)."""
        return self._context.object_storage_address
