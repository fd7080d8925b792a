"""`Client.map` and `starmap` over a session, and the gathering of many futures' results (`Client.get`'s too).

A small map goes out one call per task; a large one in chunks of several calls per task (`map_chunks`), streamed
when its length is known or grows past the lookahead (`map_stream`). An item that raises ends the map with its
exception, which names the item's index and arguments in a note; the first failure cancels the rest.
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any

from scaler.client.future import ScalerFuture
from scaler.client.map_chunks import MAX_CHUNK, chunk_size, chunk_size_lookahead, name_failed_item, run_chunk
from scaler.client.map_stream import chunks_in_flight, stream_map
from scaler.client.progress import progress_counter, wait_with_bar
from scaler.client.read_ahead import READ_AHEAD
from scaler.client.session import Session, TaskOptions
from scaler.payload.processor_context import BlockingWait
from scaler.payload.serializer import DefaultSerializer


class Mapper:
    """One client's maps: its session, and the chunk runner of each function it mapped (one stored function per
    mapped function, not one per map)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._runners: dict[int, functools.partial[list[Any]]] = {}

    def map(
        self, fn: Callable[..., Any], iterables: tuple[Iterable[Any], ...], options: TaskOptions, reserialize: bool,
        progress: bool,
    ) -> list[Any]:  # fmt: skip
        """`Client.map`: fn(*items) for the items of the iterables taken together, up to the shortest (as built-in
        map)."""
        if not iterables:
            raise TypeError("map() needs at least one iterable")
        sizes = [len(iterable) for iterable in iterables if isinstance(iterable, Sized)]
        total = min(sizes) if len(sizes) == len(iterables) else None
        calls = zip(*iterables, strict=False)
        return self.run(fn, calls, total, options, reserialize, progress, is_map_of_one_iterable=len(iterables) == 1)

    def starmap(
        self, fn: Callable[..., Any], iterable: Iterable[Iterable[Any]], options: TaskOptions, reserialize: bool,
        progress: bool,
    ) -> list[Any]:  # fmt: skip
        """`Client.starmap`: fn(*args) for each args of the iterable."""
        total = len(iterable) if isinstance(iterable, Sized) else None
        return self.run(fn, (tuple(args) for args in iterable), total, options, reserialize, progress)

    def run(
        self, fn: Callable[..., Any], calls: Iterator[tuple[Any, ...]], total: int | None, options: TaskOptions,
        reserialize: bool, progress: bool, is_map_of_one_iterable: bool = False,
    ) -> list[Any]:  # fmt: skip
        """fn(*call) for each call, the results in order. `total`: the number of calls, None when unknown.
        `is_map_of_one_iterable`: `map(fn, items)`, whose items that would fit as fn's arguments mean starmap."""
        session = self._session
        session.check_open()
        if total is None:  # an iterator: read just far enough to know whether the map is large
            lookahead = chunk_size_lookahead(session.worker_count)
            head = list(itertools.islice(calls, lookahead + 1))
            total = len(head) if len(head) <= lookahead else None  # None: large; streamed in the largest chunks
            calls = itertools.chain(head, calls)
        first = next(calls, None)
        if first is None:
            return []
        calls = itertools.chain((first,), calls)
        _check_first_call(session, fn, first, is_map_of_one_iterable)  # the first only: all would cost too much
        size = chunk_size(total, session.worker_count) if total is not None else MAX_CHUNK
        if size == 1 or not isinstance(session.serializer, DefaultSerializer):
            listed = list(calls)
            futures = session.submit_many(fn, listed, options, refresh=reserialize)
            return self.gather(futures, progress, [1] * len(futures), listed)
        runner = self._runners.get(id(fn))
        if runner is None or runner.args[0] is not fn:
            runner = self._runners[id(fn)] = functools.partial(run_chunk, fn)

        def submit(chunks: list[list[tuple[Any, ...]]], first: bool) -> list[ScalerFuture]:
            return session.submit_many(runner, [(chunk,) for chunk in chunks], options, refresh=reserialize and first)

        def cancel(future: ScalerFuture) -> None:
            session.cancel_one(future.task_id)

        window = chunks_in_flight(session.worker_count)
        with BlockingWait(), progress_counter(total, progress) as advance, session.read_ahead(window) as ahead:
            return stream_map(calls, size, window, submit, cancel, advance, ahead.ahead)

    def gather(
        self,
        futures: list[ScalerFuture],
        progress: bool = False,
        items: list[int] | None = None,
        calls: list[tuple[Any, ...]] | None = None,
    ) -> list[Any]:
        """The futures' results in order; the first failure cancels the rest and is raised, naming the map item
        (its index and arguments) when `items` and `calls` say which items each future ran."""
        try:
            with BlockingWait():
                if progress:
                    wait_with_bar(futures, items)
                else:
                    concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
            values = []
            with self._session.read_ahead(len(futures)) as ahead:  # results done are read several at once
                for index, future in enumerate(futures):
                    ahead.ahead(futures[index : index + READ_AHEAD])
                    try:
                        values.append(future.result())
                    except Exception as error:
                        if items is not None and calls is not None:
                            name_failed_item(error, sum(items[:index]), items[index], calls)
                        raise
            return values
        except BaseException:
            for future in futures:
                if not future.done():
                    self._session.cancel_one(future.task_id)
            raise


def _check_first_call(session: Session, fn: Callable[..., Any], first: tuple[Any, ...], is_map: bool) -> None:
    """TypeError when `first` cannot be fn's arguments, saying starmap when the map's one item would be (a user
    who wrote `map(add, [(1, 2), ...])` was told only "missing a required argument: 'b'")."""
    function = session.function(fn)
    try:
        function.check_call(first, {})
    except TypeError as error:
        (item,) = first if is_map else (None,)
        if not isinstance(item, (tuple, list)):
            raise
        try:
            function.check_call(tuple(item), {})
        except TypeError:
            raise error from None
        raise TypeError(
            f"{error} (map passes each item as one argument; starmap({function.name}, items) calls "
            f"{function.name}(*item) for items that are tuples of arguments)"
        ) from None
