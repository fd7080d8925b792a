"""scaler's Executor where CPython's executor tests expect theirs: `concurrent.futures.ScalerExecutor`.

CPython's tests make an executor as `executor_type(max_workers=...)`, and the tests of interpreter exit run a fresh
interpreter that does `from concurrent.futures import <executor_type.__name__>`. This module gives both, in the
conformance tier's own environment only (tests/conformance/test_stdlib_executor.py installs it there with a `.pth`
line, which every interpreter of that environment runs at start-up, `-I` ones included): when
`SCALER_CONFORMANCE_ADDRESS` names a scheduler, `concurrent.futures.ScalerExecutor` is a class whose instances are
`client.executor(max_workers=...)` of a client of their own, connected to that scheduler (with `stream_output`, so
that what a task prints appears in the interpreter that submitted it, as it does with a pool of threads or
processes). Like a pool that frees its threads, an instance closes its client once it is shut down and its work is
done. Nothing here changes what the executor does: that is scaler's own `ScalerExecutor`.
"""

from __future__ import annotations

import os
from typing import Any

ADDRESS_VARIABLE = "SCALER_CONFORMANCE_ADDRESS"
NAME = "ScalerExecutor"


def install() -> None:
    """Make `from concurrent.futures import ScalerExecutor` work when the address variable is set."""
    if not os.environ.get(ADDRESS_VARIABLE):
        return
    import concurrent.futures

    original = concurrent.futures.__getattr__

    def __getattr__(name: str) -> Any:
        if name == NAME:
            return executor_type()
        return original(name)

    concurrent.futures.__getattr__ = __getattr__  # type: ignore[method-assign]


_type: Any = None


def executor_type() -> Any:
    global _type
    if _type is None:
        _type = _make_type()
    return _type


def _make_type() -> Any:
    import concurrent.futures
    import inspect
    import threading

    from scaler import Client
    from scaler.client.executor import ScalerExecutor as Base

    class ScalerExecutor(Base):  # type: ignore[misc, valid-type]
        """`client.executor(max_workers=...)` over a client of its own (see the module's docstring)."""

        def __init__(self, max_workers: int | None = None) -> None:
            client = Client(address=os.environ[ADDRESS_VARIABLE], stream_output=True)
            try:
                if "max_workers" in inspect.signature(Base).parameters:
                    super().__init__(client, max_workers=max_workers)
                else:  # an Executor without a bound on its tasks in flight: the argument has no meaning
                    super().__init__(client)
            except BaseException:
                client.disconnect()
                raise
            self._own_client: Client | None = client
            self._closing = threading.Lock()

        def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
            super().shutdown(wait, cancel_futures=cancel_futures)
            unfinished = [future for future in list(self._unfinished) if not future.done()]
            if not unfinished:
                self._close_client()
                return
            remaining = [len(unfinished)]

            def one_done(_future: concurrent.futures.Future[Any]) -> None:
                with self._closing:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last:
                    threading.Thread(target=self._close_client, daemon=True).start()

            for future in unfinished:
                future.add_done_callback(one_done)

        def _close_client(self) -> None:
            client, self._own_client = self._own_client, None
            if client is not None:
                client.disconnect()

    ScalerExecutor.__module__ = "concurrent.futures"
    return ScalerExecutor
