"""`scaler.browser.Client`: scaler's client where there is no thread and no C extension (Pyodide in a browser), with
the calls of `scaler.Client` a notebook uses most: `submit` (a `ScalerFuture`), `map` and `starmap` (in chunks, as
`Client.map` ships them), `get` (a future's or a list of futures' results), `send_object` (an `ObjectReference` tasks
take as an argument) and `disconnect`, also as a context manager.

Functions defined in the page travel by value (cloudpickle) and run on the cluster's Python: the scheduler refuses a
client whose Python major.minor differs from its own (the page's Pyodide says which it runs), naming both versions.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from scaler.browser.session import BrowserSession, BrowserSettings
from scaler.client.future import ScalerFuture
from scaler.client.map_chunks import chunk_size, name_failed_item, run_chunk
from scaler.payload.references import ObjectReference
from scaler.payload.serializer import serialize_to_frames
from scaler.payload.task_encoder import describe, frames_size
from scaler.protocol.zmtp_curve import CurveKeys


class Client:
    def __init__(
        self,
        address: str,
        object_storage_address: str | None = None,
        timeout_seconds: float = 60.0,
        connect_timeout_seconds: float = 15.0,
        profiling: bool = False,
        stream_output: bool = False,
        *,
        curve_secret_key: str | None = None,
        curve_server_key: str | None = None,
    ) -> None:
        """`address`: the scheduler's WebSocket address (`ws://HOST:PORT` or `wss://...`; outside a browser,
        `tcp://`). `object_storage_address`: the object storage server's, when the scheduler's own answer names one the
        page cannot reach (its `tcp://` address: give the `ws://` one the stack binds for browsers). Connects at once;
        ConnectionError when no scheduler answers within `connect_timeout_seconds`, IncompatiblePeerError when the
        cluster runs another Python minor version. `curve_secret_key`, `curve_server_key`: for a cluster secured with
        CURVE (the default), this client's secret key file and the server's public key file, each as its text (what a
        page reads from the files the reader picks) or its path; ValueError naming what is wrong with one."""
        keys = None
        if curve_secret_key is not None or curve_server_key is not None:
            if curve_secret_key is None or curve_server_key is None:
                raise ValueError("give both curve_secret_key (client.key_secret) and curve_server_key (server.key)")
            keys = CurveKeys.from_texts(_key_text(curve_secret_key), _key_text(curve_server_key))
        settings = BrowserSettings(
            object_storage_address, timeout_seconds, connect_timeout_seconds, profiling=profiling,
            stream_output=stream_output, keys=keys,
        )  # fmt: skip
        self._session = BrowserSession(address, settings)
        self._runners: dict[int, functools.partial[list[Any]]] = {}

    @property
    def address(self) -> str:
        return self._session.address

    def __repr__(self) -> str:
        state = "connected" if self._session.error is None else f"closed: {self._session.error}"
        return f"Client(address={self.address!r}, workers={self._session.worker_count}, {state})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.disconnect()

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> ScalerFuture[Any]:
        """Run fn(*args, **kwargs) on a worker."""
        return self._session.submit(fn, [(args, kwargs)])[0]

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any]) -> list[Any]:
        """fn over the items of the iterables (as the builtin `map`), the results in order; the first failure is raised,
        naming the item that raised, and the rest are cancelled."""
        return self.starmap(fn, zip(*iterables, strict=False))

    def starmap(self, fn: Callable[..., Any], calls: Iterable[Sequence[Any]]) -> list[Any]:
        listed = [tuple(call) for call in calls]
        if not listed:
            return []
        size = chunk_size(len(listed), self._session.worker_count)
        if size == 1:
            futures = self._session.submit(fn, [(call, {}) for call in listed])
            return self._gather(futures, [1] * len(futures), listed)
        runner = self._runners.get(id(fn))
        if runner is None or runner.args[0] is not fn:
            runner = self._runners[id(fn)] = functools.partial(run_chunk, fn)
        chunks = [listed[start : start + size] for start in range(0, len(listed), size)]
        futures = self._session.submit(runner, [((chunk,), {}) for chunk in chunks])
        values = self._gather(futures, [len(chunk) for chunk in chunks], listed)
        return list(itertools.chain.from_iterable(values))

    def get(self, futures: ScalerFuture[Any] | Sequence[ScalerFuture[Any]], timeout: float | None = None) -> Any:
        """A future's result, or each result of a list of futures, in order."""
        if isinstance(futures, ScalerFuture):
            return futures.result(timeout)
        return [future.result(timeout) for future in futures]

    def send_object(self, obj: Any, name: str | None = None) -> ObjectReference:
        """Store obj once in the cluster's object storage; tasks take the returned reference as an argument and get
        obj."""
        self._session.check_open()
        try:
            frames = serialize_to_frames(self._session.settings.serializer, obj)
        except Exception as error:
            raise TypeError(f"cannot serialize the object of type {describe(obj)}: {error}") from error
        label = name if name is not None else f"object of {describe(obj)}"
        object_id = self._session.store(frames if len(frames) > 1 else frames[0], label)
        return ObjectReference(label.encode(), frames_size(frames), object_id)

    def disconnect(self) -> None:
        """Cancel this client's unfinished tasks, delete its objects and leave; the cluster keeps running."""
        self._session.close()

    def _gather(self, futures: list[ScalerFuture[Any]], items: list[int], calls: list[tuple[Any, ...]]) -> list[Any]:
        """The futures' results in order; the first failure cancels the rest and is raised, naming its map item."""
        self._session.wait(lambda: all(future.done() for future in futures) or _failed(futures), None)
        try:
            values = []
            for index, future in enumerate(futures):
                try:
                    values.append(future.result())
                except Exception as error:
                    name_failed_item(error, sum(items[:index]), items[index], calls)
                    raise
            return values
        except BaseException:
            self._session.cancel([future.task_id for future in futures if not future.done()])
            raise


def _key_text(key: str) -> str:
    """A key file's text, given as such or as the file's path."""
    if "-key" in key or len(key.strip()) == 40:
        return key
    try:
        with open(key, encoding="utf-8") as file:
            return file.read()
    except OSError as error:
        raise ValueError(f"{key}: not a key file's text, and no key file there ({error.strerror})") from None


def _failed(futures: list[ScalerFuture[Any]]) -> bool:
    return any(future.done() and not future.cancelled() and future.exception(0) is not None for future in futures)
