"""`AsyncClient`: the client for asyncio code (services, notebooks), over the same connection machinery as `Client`.

An AsyncClient holds one `Client` (its `ClientAgent` and `ClientCore`, its I/O thread, its task encoder and object
storage connection): every coroutine of the program shares that one connection. What this module adds is how
asyncio code waits: a task's completion wakes the awaiting coroutine through `call_soon_threadsafe` from the
client's I/O thread, and whatever could block the event loop (the connection's handshake, fetching a result from
object storage and unpickling it, a `map` or a graph, storing an object, disconnecting) runs on a small thread pool
of the AsyncClient's, never on the loop's thread. It never starts or runs an event loop of its own in the caller's
thread, so it works inside a loop that is already running (Jupyter, FastAPI, any `asyncio.run`).

`submit_future` encodes the call on the calling thread, so an argument that cannot be pickled raises right there;
an argument over 64 KiB is also stored from that thread (`await client.submit(...)` does both on the pool, and
`await client.send_object(...)` stores a large object once, off the loop, for calls to reference).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import AsyncIterator, Callable, Generator, Iterable
from typing import Any, TypeVar

from scaler.client.actors import DEFAULT_MAX_RESTARTS, ActorHandle, spec_of
from scaler.client.client import Client, actor_handle_in_task
from scaler.client.future import ScalerFuture
from scaler.client.session import TaskOptions
from scaler.client.streams import STREAM_END, TaskStream
from scaler.payload.references import ObjectReference
from scaler.protocol.ids import TaskID

T = TypeVar("T")

#: Threads of an AsyncClient's pool: each blocking step (a result's fetch, a map, a graph) holds one while it runs.
POOL_THREADS = 8


class AsyncFuture:
    """An awaitable handle on one task: `await future` is its result (fetched and unpickled off the loop)."""

    def __init__(self, future: ScalerFuture, pool: concurrent.futures.Executor) -> None:
        self._future = future
        self._pool = pool

    @property
    def task_id(self) -> TaskID:
        return self._future.task_id

    @property
    def scaler_future(self) -> ScalerFuture:
        """The underlying thread-side future (for `concurrent.futures.wait` and the like)."""
        return self._future

    def __repr__(self) -> str:
        return f"<AsyncFuture of {self._future!r}>"

    def done(self) -> bool:
        return self._future.done()

    def cancelled(self) -> bool:
        return self._future.cancelled()

    async def result(self) -> Any:
        await wait_done(self._future)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._future.result)

    async def exception(self) -> BaseException | None:
        await wait_done(self._future)
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._future.exception)

    async def cancel(self) -> bool:
        """Ask the scheduler to cancel the task and wait for its answer; True if it was cancelled, False if it
        finished first."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._future.cancel)

    def __await__(self) -> Generator[Any, None, Any]:
        return self.result().__await__()


class AsyncStream:
    """The values of a streaming task for asyncio code (`async for value in stream`), as `TaskStream` gives them to a
    thread: the I/O thread wakes the loop when the next value or the end is there; a value is read (fetched from
    storage, unpickled) on the AsyncClient's pool, never on the loop."""

    def __init__(self, stream: TaskStream[Any], pool: concurrent.futures.Executor) -> None:
        self._stream = stream
        self._pool = pool

    @property
    def task_stream(self) -> TaskStream[Any]:
        """The underlying thread-side stream (its future: `done()`, `result()`, the number of values)."""
        return self._stream

    @property
    def task_id(self) -> TaskID:
        return self._stream.task_id

    def __repr__(self) -> str:
        return f"<AsyncStream of {self._stream!r}>"

    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> Any:
        stream = self._stream
        if not stream.is_ready():
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()

            def wake() -> None:
                try:
                    loop.call_soon_threadsafe(_settle, waiter)
                except RuntimeError:  # the loop is closed: nobody waits any more
                    pass

            stream.when_ready(wake)
            await waiter
        found, value = await asyncio.get_running_loop().run_in_executor(self._pool, self._read)
        if not found:
            raise StopAsyncIteration
        return value

    def _read(self) -> tuple[bool, Any]:
        item = self._stream.next_item()
        if item is STREAM_END:
            return False, None
        return True, self._stream.value_of(item)

    async def cancel(self) -> bool:
        """Stop the task's generator on its worker and wait for the scheduler's answer; True if it was cancelled,
        False if it ended first."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._stream.cancel)


async def wait_done(future: concurrent.futures.Future[Any]) -> None:
    """Until the future is done, without reading its result: the client's I/O thread wakes the loop."""
    if future.done():
        return
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: concurrent.futures.Future[Any]) -> None:
        try:
            loop.call_soon_threadsafe(_settle, waiter)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    future.add_done_callback(wake)
    await waiter


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class AsyncClient:
    """`async with AsyncClient(address) as client:` then `await client.submit(f, x)`; see the module docstring.
    Takes `Client`'s arguments."""

    def __init__(self, address: str | None = None, **client_settings: Any) -> None:
        self._address = address
        self._settings = client_settings
        self._client: Client | None = None
        self._pool = concurrent.futures.ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="scaler-async-client")

    def __repr__(self) -> str:
        return f"AsyncClient({self._client!r})" if self._client is not None else "AsyncClient(not connected)"

    @property
    def client(self) -> Client:
        """The `Client` underneath (thread-side API, same connection)."""
        if self._client is None:
            raise RuntimeError(
                "the AsyncClient is not connected: use `async with AsyncClient(...)` or `await connect()`"
            )
        return self._client

    async def connect(self) -> AsyncClient:
        """Connect (the handshake waits on the pool, not on the loop)."""
        if self._client is None:
            self._client = await self._off_loop(Client, self._address, **self._settings)
        return self

    async def __aenter__(self) -> AsyncClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect()

    async def disconnect(self) -> None:
        """Cancel this client's unfinished tasks and leave; the cluster keeps running."""
        if self._client is not None:
            await self._off_loop(self._client.disconnect)
        self._pool.shutdown(wait=False)

    # ------------------------------------------------------------ tasks

    def submit_future(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> AsyncFuture:
        """Submit `fn(*args, **kwargs)` now; an awaitable future of its result."""
        return AsyncFuture(self.client.submit_verbose(fn, args, kwargs), self._pool)

    async def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """The result of `fn(*args, **kwargs)`, run on a worker."""
        future = await self._off_loop(self.client.submit_verbose, fn, args, kwargs)
        return await AsyncFuture(future, self._pool)

    def stream(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> AsyncStream:
        """Submit `fn(*args, **kwargs)` now as a streaming task (`Client.stream`): `async for value in ...` gives its
        values as they are made."""
        return AsyncStream(self.client.stream_verbose(fn, args, kwargs), self._pool)

    def stream_verbose(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], **options: Any
    ) -> AsyncStream:
        """`stream` with `Client.stream_verbose`'s options (`window`, `capabilities`, `priority`, ...)."""
        return AsyncStream(self.client.stream_verbose(fn, args, kwargs, **options), self._pool)

    def stream_map(self, fn: Callable[..., Any], *iterables: Iterable[Any], **options: Any) -> list[AsyncStream]:
        """`Client.stream_map`: one AsyncStream per item, all submitted now."""
        return [AsyncStream(stream, self._pool) for stream in self.client.stream_map(fn, *iterables, **options)]

    def actor(self, cls: type[T], /, *args: Any, **kwargs: Any) -> ActorHandle[T]:
        """`Client.actor`: `handle.method(...)` is an awaitable future of the call."""
        return self.actor_verbose(cls, args, kwargs)

    def actor_verbose(
        self, cls: type[T], args: tuple[Any, ...], kwargs: dict[str, Any], *, max_restarts: int = DEFAULT_MAX_RESTARTS,
        max_concurrency: int = 1, name: str | None = None, capabilities: dict[str, int] | None = None,
    ) -> ActorHandle[T]:  # fmt: skip
        """`Client.actor_verbose`, with awaitable calls."""
        spec = spec_of(cls, max_restarts, max_concurrency, name)
        options = TaskOptions.of(None, capabilities)
        return ActorHandle.start(
            self.client.session, cls, args, kwargs, spec, options, actor_handle_in_task, wrap=self._awaitable
        )

    async def get_actor(self, name: str) -> ActorHandle[Any]:
        """`Client.get_actor` (the look-up waits off the loop), with awaitable calls."""
        return await self._off_loop(
            ActorHandle.look_up, self.client.session, name, actor_handle_in_task, self._awaitable
        )

    def _awaitable(self, future: ScalerFuture) -> AsyncFuture:
        return AsyncFuture(future, self._pool)

    async def map(self, fn: Callable[..., Any], *iterables: Iterable[Any], **settings: Any) -> list[Any]:
        """`Client.map`: the results in order."""
        return await self._off_loop(self.client.map, fn, *iterables, **settings)

    async def starmap(self, fn: Callable[..., Any], iterable: Iterable[Iterable[Any]], **settings: Any) -> list[Any]:
        return await self._off_loop(self.client.starmap, fn, iterable, **settings)

    async def get(self, graph: dict[Any, Any], keys: list[Any], **settings: Any) -> dict[Any, Any]:
        """`Client.get`: run a graph, {key: result} for the requested keys."""
        futures: dict[Any, ScalerFuture] = await self._off_loop(self.client.get, graph, keys, block=False, **settings)
        for future in futures.values():
            await wait_done(future)
        return await self._off_loop(lambda: {key: future.result() for key, future in futures.items()})

    async def as_completed(
        self, futures: Iterable[AsyncFuture | ScalerFuture], timeout: float | None = None
    ) -> AsyncIterator[AsyncFuture]:
        """Each future (once) as it finishes; `asyncio.TimeoutError` when `timeout` seconds pass first."""
        handles: dict[int, AsyncFuture] = {}
        for future in futures:
            handle = future if isinstance(future, AsyncFuture) else AsyncFuture(future, self._pool)
            handles.setdefault(id(handle.scaler_future), handle)
        loop = asyncio.get_running_loop()
        finished: asyncio.Queue[AsyncFuture] = asyncio.Queue()
        for handle in handles.values():
            handle.scaler_future.add_done_callback(functools.partial(_enqueue, loop, finished, handle))
        deadline = None if timeout is None else loop.time() + timeout
        for _ in range(len(handles)):
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            yield await asyncio.wait_for(finished.get(), remaining)

    # ------------------------------------------------------------ objects

    async def send_object(self, obj: Any, name: str | None = None) -> ObjectReference:
        """Store `obj` once (off the loop); calls receive the object wherever they get the reference."""
        return await self._off_loop(self.client.send_object, obj, name)

    async def _off_loop(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        call = functools.partial(function, *args, **kwargs) if kwargs else functools.partial(function, *args)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)


def _enqueue(
    loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[AsyncFuture], handle: AsyncFuture, _: object
) -> None:
    try:
        loop.call_soon_threadsafe(queue.put_nowait, handle)
    except RuntimeError:  # the loop is closed
        pass
