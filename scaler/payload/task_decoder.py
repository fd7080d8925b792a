"""A Task as a call, on the processor's side: its serializer, function and arguments loaded from bytes.

The client's serializer and the task's function are fetched from object storage once and kept by id (the
`MAX_CACHED_FUNCTIONS` most recently used: each client has its own ids, and clients come and go); object arguments
are kept deserialized (up to `OBJECT_CACHE_BYTES`, least recently used first out, and none unused for
`OBJECT_IDLE_SECONDS`) while they still exist in storage. Whether one still exists is asked of storage unless the
object is the task's own client's (its id starts with the client's `owner_tag`) and was fetched or checked for that
client in the task's clear epoch (`TaskBody.clear_epoch`): a client's objects are deleted by its clear(), after
which its tasks carry a new epoch, or when it leaves, after which it sends no task; so such an object still exists.
(Two clients whose 4-byte tags collide, about one pair in 4e9, could see a deleted object of the other used from the
cache: the content its id names, never other data.)

A reference inside an argument (`ObjectReference`, `NodeResult`) unpickles as its object through the resolvers
installed while the arguments are read. A task that cannot become a call (an object gone from storage, bytes that do
not deserialize) ends here with the TaskResult that says why; one whose input could not be fetched (storage silent or
unreachable) ends INPUT_UNREACHABLE, which the scheduler retries.
"""

from __future__ import annotations

import collections
import pickle
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaler.errors import DeserializeObjectError, MissingObjects, ObjectStorageException
from scaler.payload import references
from scaler.payload.result_writer import failed_result
from scaler.payload.serializer import DefaultSerializer, Serializer, deserialize_frames, deserialize_with
from scaler.payload.storage import ReadsTogether, StorageAccess
from scaler.payload.task_encoder import OWNER_TAG_BYTES, owner_tag
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ObjectID, TaskID

#: Deserialized objects kept per processor (by serialized size), for objects reused across tasks.
OBJECT_CACHE_BYTES = 1 << 30
#: An object not used for this long is dropped: most are never used again once their client left (and deleted them),
#: and one that is costs a fetch from storage, little after half a minute unused (the soak's processors otherwise held
#: every 1 MB object of the last clients, 420 MiB each after 2 minutes with a 2-minute idle time).
OBJECT_IDLE_SECONDS = 30.0
#: Functions and serializers kept per processor, at most (least recently used first out): each client has its own
#: ids for them, so clients that come and go would otherwise add to them for as long as the processor lives.
MAX_CACHED_FUNCTIONS = 1024
#: What a function whose module is missing where it runs says to do (docs/guide/code_on_workers.md).
MISSING_MODULE_HINT = (
    "the module is not importable where the task ran; send it with the task (cloudpickle.register_pickle_by_value("
    "module) in the client, or run the client against a stack that does: `scaler FILE` with a cloud or Batch manager, "
    "`scaler_scheduler --ship-local-modules`), or install it there (`scaler --docs code_on_workers`)"
)

_DEFAULT = DefaultSerializer()
_NEEDED = "an object the task needs"


@dataclass(slots=True)
class DecodedCall:
    """A task ready to be called: `function(*args, **kwargs)`, its result serialized with `serializer`."""

    function: Any
    args: list[Any]
    kwargs: dict[str, Any]
    serializer: Serializer
    profiling: bool
    stream_output: bool
    log_forwarding: m.LogForwarding | None = None


class ObjectCache:
    """Deserialized objects by id, least recently used dropped first beyond a byte budget, and any not used for
    `idle_seconds` dropped (pure: the caller says what time it is)."""

    def __init__(self, budget_bytes: int, idle_seconds: float = OBJECT_IDLE_SECONDS) -> None:
        self._budget = budget_bytes
        self._idle = idle_seconds
        self._used = 0
        #: key -> (value, size, last used), least recently used first
        self._entries: collections.OrderedDict[tuple[bytes, bytes], tuple[Any, int, float]] = collections.OrderedDict()

    def get(self, key: tuple[bytes, bytes], now: float) -> tuple[bool, Any]:
        self.drop_idle(now)
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        self._entries[key] = (entry[0], entry[1], now)
        self._entries.move_to_end(key)
        return True, entry[0]

    def put(self, key: tuple[bytes, bytes], value: Any, size: int, now: float) -> None:
        if size > self._budget:
            return
        self.drop(key)
        self._entries[key] = (value, size, now)
        self._used += size
        while self._used > self._budget:
            _, (_, dropped, _) = self._entries.popitem(last=False)
            self._used -= dropped

    def drop(self, key: tuple[bytes, bytes]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._used -= entry[1]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: tuple[bytes, bytes]) -> bool:
        return key in self._entries

    def drop_idle(self, now: float) -> None:
        """Drop the objects not used for the idle time (the least recently used is first: stop at one that was)."""
        while self._entries:
            key, (_, size, last_used) = next(iter(self._entries.items()))
            if now - last_used < self._idle:
                return
            del self._entries[key]
            self._used -= size


class RecentlyUsed:
    """Values by key, at most `limit`, the least recently used dropped first."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._entries: collections.OrderedDict[bytes, Any] = collections.OrderedDict()

    def get(self, key: bytes) -> Any | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: bytes, value: Any) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class _TaskFailure(Exception):
    """Ends a task with a status other than success/failed (raised before the user function runs)."""

    def __init__(self, status: m.ResultStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def _unreachable(what: str, object_id: bytes, error: ObjectStorageException) -> _TaskFailure:
    """An input that could not be fetched (storage silent or unreachable, the read broken off): not the task's fault,
    so the scheduler runs it again within its retry budget, as when its worker dies."""
    return _TaskFailure(
        m.ResultStatus.INPUT_UNREACHABLE, f"{what} (object {bytes(object_id).hex()}) could not be fetched: {error}"
    )


class TaskDecoder:
    """Per processor: turns tasks into calls, keeping serializers, functions and objects across tasks."""

    def __init__(self, storage: Callable[[], StorageAccess], clock: Callable[[], float] = time.monotonic) -> None:
        self._storage = storage
        self._clock = clock
        self._functions = RecentlyUsed(MAX_CACHED_FUNCTIONS)
        self._serializers = RecentlyUsed(MAX_CACHED_FUNCTIONS)
        self._objects = ObjectCache(OBJECT_CACHE_BYTES)
        #: object id -> the (client, clear epoch) it was last fetched or found in storage for
        self._known_for: dict[bytes, tuple[bytes, int]] = {}
        self._asker: tuple[bytes, int] = (b"", 0)  #: the (client, clear epoch) of the task being decoded
        self._tag = b""  #: that client's owner tag
        self._tag_of = b""  #: the client `_tag` is the tag of (a hash: made again only for another client's task)
        #: object id -> its frames, mapped for the task being decoded by `_map_together`, taken by its argument's read
        self._together: dict[bytes, list[memoryview]] = {}

    def decode(self, task: m.Task) -> DecodedCall | m.TaskResult:
        """The call `task` stands for, or the TaskResult that ends a task that cannot become one."""
        self._objects.drop_idle(self._clock())
        try:
            body = codec.decode_body(task.body)
            self._asker = (bytes(task.client_id), body.clear_epoch)
            if task.client_id != self._tag_of:
                self._tag, self._tag_of = owner_tag(task.client_id), bytes(task.client_id)
            serializer = self._serializer(body.serializer_id)
            function = self._function(body.function_id, serializer)
            args, kwargs = self._arguments(body, task, serializer)
        except _TaskFailure as failure:
            return m.TaskResult(task.task_id, failure.status, error_message=str(failure))
        except Exception as error:
            return failed_result(task, error, "".join(traceback.format_exception(error)))
        return DecodedCall(function, args, kwargs, serializer, body.profiling, body.stream_output, body.log_forwarding)

    def _serializer(self, serializer_id: ObjectID) -> Serializer:
        if not serializer_id:
            return _DEFAULT
        serializer: Serializer | None = self._serializers.get(serializer_id)
        if serializer is None:
            payload = self._fetch(serializer_id, "the client's serializer")
            try:
                serializer = pickle.loads(payload)
            except Exception as error:
                raise DeserializeObjectError(f"could not load the client's serializer: {error!r}") from error
            self._serializers.put(serializer_id, serializer)
        return serializer

    def _function(self, function_id: ObjectID, serializer: Serializer) -> Any:
        key = function_id
        function = self._functions.get(key)
        if function is None:
            payload = self._fetch(function_id, "the task's function")
            try:
                function = deserialize_with(serializer, payload)
            except ModuleNotFoundError as error:
                raise DeserializeObjectError(
                    f"could not deserialize the task's function: {error!r}: {MISSING_MODULE_HINT}"
                ) from error
            except Exception as error:
                raise DeserializeObjectError(f"could not deserialize the task's function: {error!r}") from error
            self._functions.put(key, function)
        return function

    def _arguments(self, body: m.TaskBody, task: m.Task, serializer: Serializer) -> tuple[list[Any], dict[str, Any]]:
        inputs = {given.task_id: given for given in task.inputs}
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        references.install_resolver(lambda object_id, writable: self._object(object_id, serializer, writable))
        references.install_node_resolver(
            lambda task_id: self._argument(m.Argument(m.ArgumentKind.TASK_RESULT, task_id), inputs, serializer, -1)
        )
        try:
            self._map_together(body, task, inputs, serializer)
            for position, argument in enumerate(body.args):
                value = self._argument(argument, inputs, serializer, position)
                if argument.keyword:
                    kwargs[argument.keyword] = value
                else:
                    args.append(value)
        finally:
            references.install_resolver(None)
            references.install_node_resolver(None)
            self._together.clear()
        return args, kwargs

    def _map_together(
        self, body: m.TaskBody, task: m.Task, inputs: dict[TaskID, m.TaskInput], serializer: Serializer
    ) -> None:
        """Asks for the task's object arguments not cached here all at once (those it names, its graph inputs stored
        as objects, and the references its client noted inside them, `Task.large_inputs`), where the storage
        connection maps objects (`ReadsTogether`): a host cache fetches the ones it lacks side by side, each from the
        host that holds it (a shuffle's reader takes one partition from every maker host), where reads one after
        another would fetch them in turn, each at the rate of one source. What comes is kept for the arguments'
        reads below."""
        wanted: list[bytes] = [bytes(object_id) for object_id in task.large_inputs]
        for argument in body.args:
            if argument.copy_on_write:
                continue  # a private copy is mapped for the task alone
            if argument.kind is m.ArgumentKind.OBJECT_ID:
                wanted.append(bytes(argument.data))
            elif argument.kind is m.ArgumentKind.TASK_RESULT:
                given = inputs.get(TaskID(argument.data))
                if given is not None and given.kind is m.PayloadKind.OBJECT_ID:
                    wanted.append(bytes(given.data))
        cached = self._objects
        wanted = [object_id for object_id in dict.fromkeys(wanted) if _cache_key(serializer, object_id) not in cached]
        if len(wanted) < 2:
            return
        storage = self._storage()
        if isinstance(storage, ReadsTogether):
            try:
                self._together.update(storage.map_together(wanted))
            except ObjectStorageException:
                pass  # each argument's own read asks again, and says what failed

    def _argument(
        self, argument: m.Argument, inputs: dict[TaskID, m.TaskInput], serializer: Serializer, position: int
    ) -> Any:
        kind, data = argument.kind, argument.data
        if kind is m.ArgumentKind.TASK_RESULT:
            given = inputs.get(TaskID(data))
            if given is None:
                raise _TaskFailure(m.ResultStatus.ERROR, f"the result of graph node {data.hex()} was not provided")
            kind = m.ArgumentKind.INLINE if given.kind is m.PayloadKind.INLINE else m.ArgumentKind.OBJECT_ID
            data = given.data
        if kind is m.ArgumentKind.OBJECT_ID:
            return self._object(data, serializer, argument.copy_on_write)
        try:
            return deserialize_with(serializer, data)
        except _TaskFailure:
            raise
        except Exception as error:
            name = argument.keyword or f"#{position}"
            raise DeserializeObjectError(f"could not deserialize argument {name}: {error!r}") from error

    def _object(self, object_id: bytes, serializer: Serializer, writable: bool = False) -> Any:
        """An object argument; a cached copy is used only while the object still exists in storage, so
        a reference made stale by client.clear() fails instead of silently using old data. `writable`: a private
        copy-on-write view of the object, made for this task alone (never cached)."""
        if writable:
            return self._deserialized(object_id, serializer, self._fetch_frames(ObjectID(object_id), _NEEDED, True))
        key = _cache_key(serializer, object_id)
        found, value = self._objects.get(key, self._clock())
        if found and self._known_for.get(object_id) == self._asker and object_id[:OWNER_TAG_BYTES] == self._tag:
            return value  # fetched or checked for this client in this epoch: not deleted since (see the docstring)
        if found:
            try:
                exists = self._storage().exists(object_id)
            except ObjectStorageException as error:
                raise _unreachable(_NEEDED, object_id, error) from None
            if not exists:
                self._objects.drop(key)  # deleted for good: no task can use it any more
                raise _TaskFailure(
                    m.ResultStatus.MISSING_OBJECT,
                    f"object {object_id.hex()} is not in object storage any more: it was deleted by client.clear() "
                    f"or its client left",
                )
            self._remember(object_id)
            return value
        frames = self._fetch_frames(ObjectID(object_id), _NEEDED)
        value = self._deserialized(object_id, serializer, frames)
        self._objects.put(key, value, sum(len(frame) for frame in frames), self._clock())
        self._remember(object_id)
        return value

    @staticmethod
    def _deserialized(object_id: bytes, serializer: Serializer, frames: list[memoryview]) -> Any:
        try:
            return deserialize_frames(serializer, frames)
        except _TaskFailure:
            raise  # a reference inside it to an object that could not be had
        except Exception as error:
            raise DeserializeObjectError(f"could not deserialize object {object_id.hex()}: {error!r}") from error

    def _remember(self, object_id: bytes) -> None:
        if len(self._known_for) > 100_000:  # ids of objects long dropped from the cache: start again
            self._known_for.clear()
        self._known_for[bytes(object_id)] = self._asker

    def _fetch(self, object_id: ObjectID, what: str) -> bytes | bytearray | memoryview:
        frames = self._fetch_frames(object_id, what)
        return frames[0] if len(frames) == 1 else b"".join(frames)

    def _fetch_frames(self, object_id: ObjectID, what: str, writable: bool = False) -> list[memoryview]:
        if not writable:
            together = self._together.pop(bytes(object_id), None)
            if together is not None:
                return together
        try:
            return self._storage().get_frames(object_id, copy_on_write=writable)
        except ObjectStorageException as error:
            raise _unreachable(what, object_id, error) from None
        except MissingObjects as error:
            raise _TaskFailure(
                m.ResultStatus.MISSING_OBJECT,
                f"{what} (object {object_id.hex()}) is not in object storage: it was deleted by client.clear(), "
                f"its client left, or the object storage server restarted and lost it ({error})",
            ) from None


def _cache_key(serializer: Serializer, object_id: bytes) -> tuple[bytes, bytes]:
    """An object's key in the decoder's cache: a value deserialized by one serializer is not another's."""
    return id(serializer).to_bytes(8, "little"), object_id
