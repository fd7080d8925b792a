"""A call as a Task, on the client's side: functions stored once per client, arguments inline or in storage.

Object ids of what a client stores are content-addressed (sha256 of the client id and the bytes), so
identical functions and objects are stored once; ids differ between clients, so one client's
cleanup never deletes another's objects. An object whose fingerprint matches nothing stored (from 64 KiB on the
storage's host, from 8 MiB elsewhere) is new content: it gets a random id and is hashed only if another object of
its fingerprint comes (`put_object`). Every id a client makes starts with its `owner_tag`, so a processor
can tell the objects of the task's own client from others (see task_decoder).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import inspect
import itertools
import pickle
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from scaler.payload.references import CopyOnWrite, ObjectReference, noted_while
from scaler.payload.serializer import DefaultSerializer, Serializer, one_payload, serialize_to_frames
from scaler.payload.storage import INLINE_LIMIT_BYTES
from scaler.payload.stored_objects import ObjectSink, StoredReader
from scaler.payload.uploads import Upload, WithUploads
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.frozen_values import constructor
from scaler.protocol.ids import ClientID, GraphID, ObjectID, TaskID, new_random_object_id

#: From this size, an object whose fingerprint matches nothing stored yet travels while it is being hashed.
LARGE_OBJECT_BYTES = 8 * 1024 * 1024
#: From this size (where objects become files of the storage's segment directory), an object put from the storage's
#: host whose fingerprint matches nothing stored yet is stored under a random id without being hashed.
UNHASHED_FROM_BYTES = 64 * 1024
#: A fingerprint reads this many pieces of this many bytes of each frame, spread over it (and each frame's length).
FINGERPRINT_PIECES, FINGERPRINT_PIECE_BYTES = 16, 256


Frames = list[Any]  #: the buffers an object is stored as (see serializer.serialize_to_frames)

#: Values a task's argument often is, pickled by `TaskEncoder.argument` at once, as serialize_to_frames would (their
#: pickle is one frame, inline unless it is a huge int).
_SMALL_PLAIN = frozenset({int, float, bool, type(None), complex})
#: The stored objects a task names for placement near them (Task.largeInputs): its stored arguments in argument order,
#: then the references inside its arguments (a list of them, a map chunk's calls), the first ones.
MAX_LARGE_INPUTS = 4
_OBJECT_ID = m.ArgumentKind.OBJECT_ID
#: Values made per task, through their slots (frozen_values.constructor: a frozen dataclass's __init__ costs twice)
_NEW_ARGUMENT = constructor(m.Argument)
_NEW_TASK_BODY = constructor(m.TaskBody)
_NEW_TASK = constructor(m.Task)


#: The bytes of an object id that name its owner (the rest is the content's digest, or random for large objects).
OWNER_TAG_BYTES = 4


def owner_tag(owner: bytes) -> bytes:
    return hashlib.sha256(b"owner:" + bytes(owner)).digest()[:OWNER_TAG_BYTES]


def content_id(owner: bytes, payload: bytes | bytearray | memoryview | Frames) -> ObjectID:
    """The id of this owner's object of this content: of its frames and their lengths (frames split differently, as
    out-of-band buffers whose lengths the pickle stream does not say, are another content)."""
    digest = hashlib.sha256(owner)
    if isinstance(payload, list):
        for frame in payload:
            digest.update(memoryview(frame).nbytes.to_bytes(8, "little"))
            digest.update(frame)
    else:
        digest.update(payload)
    return ObjectID(owner_tag(owner) + digest.digest()[: 16 - OWNER_TAG_BYTES])


def fingerprint(payload: bytes | bytearray | memoryview | Frames) -> bytes | None:
    """What two objects of equal content share, read from a few KB of each frame whatever its size (and the frames'
    lengths): objects whose fingerprints differ differ, so only objects of equal fingerprints need their content ids
    (`TaskEncoder.put_object`). None for a buffer that is not contiguous (such an object is hashed whole)."""
    digest = hashlib.sha256()
    for frame in payload if isinstance(payload, list) else (payload,):
        try:
            view = pickle.PickleBuffer(frame).raw()
        except (BufferError, TypeError):
            return None
        size = view.nbytes
        digest.update(size.to_bytes(8, "little"))
        if size <= FINGERPRINT_PIECES * FINGERPRINT_PIECE_BYTES:
            digest.update(view)
            continue
        last = size - FINGERPRINT_PIECE_BYTES
        for piece in range(FINGERPRINT_PIECES):
            start = last * piece // (FINGERPRINT_PIECES - 1)
            digest.update(view[start : start + FINGERPRINT_PIECE_BYTES])
    return digest.digest()[:16]


def frames_size(payload: bytes | Frames) -> int:
    return sum(len(frame) for frame in payload) if isinstance(payload, list) else len(payload)


def _same(value: Any) -> Any:
    return value


def describe(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__qualname__


@dataclass(frozen=True)
class FunctionEntry:
    #: the function: a weak reference when it takes one (the cache must not keep a callable, or a bound method's
    #: object, alive after its tasks are sent), else a strong one (builtins, which live as long as the interpreter)
    function: Callable[[], Any]
    object_id: ObjectID
    name: str
    takes_profiling: bool  #: the function has its own `profiling` parameter
    signature: inspect.Signature | None = None  #: None for builtins and C functions without one
    #: the number of parameters when every one is a plain positional parameter without a default (then that many
    #: positional arguments and no keyword always bind); None otherwise
    plain_arity: int | None = None

    def check_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """TypeError in the caller when the arguments cannot bind to the function's signature."""
        if self.plain_arity == len(args) and not kwargs:
            return
        if self.signature is not None:
            try:
                self.signature.bind(*args, **kwargs)
            except TypeError as error:
                raise TypeError(f"cannot submit {self.name}: {error}") from None


class TaskEncoder:
    """Per-client: function cache and argument encoding. Objects go to `objects` (`stored_objects.ObjectSink`),
    which stores each id once; an argument's put may be pipelined there (`later`), and the caller then holds the task
    until it is stored (client/object_storage_side.py)."""

    def __init__(
        self,
        client_id: ClientID,
        serializer: Serializer,
        objects: ObjectSink,
        ship_local_modules: bool = False,
        stored: StoredReader | None = None,
    ) -> None:
        """`stored`: reads back what was stored; where that costs no transfer (the storage's host), an object's digest
        is taken from its stored copy, and only once another object of its fingerprint comes (see `put_object`)."""
        self._client_id = client_id
        #: pickle the functions of the client's own (not installed) modules by value: its workers run elsewhere
        self._ship_local_modules = ship_local_modules
        self._serializer = serializer
        self._objects = objects
        self._serializer_id: ObjectID | None = None
        self._functions: dict[int, FunctionEntry] = {}
        self._clear_epoch = 0  #: how many times the client cleared its objects (see TaskBody.clear_epoch)
        self._stored = stored
        #: objects stored under a random id: content digest -> id, and their fingerprints (equal content needs an
        #: equal fingerprint)
        self._large: dict[bytes, ObjectID] = {}
        self._fingerprints: set[bytes] = set()
        #: the ids of objects stored under a random id (`_new_object_id`)
        self._owner_tag = owner_tag(client_id)
        self._id_base = new_random_object_id()[:8]
        self._id_numbers = itertools.count(1)
        #: objects stored without their digest yet, by fingerprint: (id, whether its payload was a list of frames)
        self._undigested: dict[bytes, list[tuple[ObjectID, bool]]] = {}
        #: set by Client.forward_logging: the tasks encoded from then on ask for their logging records
        self.log_forwarding: m.LogForwarding | None = None
        #: the serializer pickles a plain value as `serialize_to_frames` does (`argument`'s short way)
        self._plain_pickles = type(serializer) is DefaultSerializer
        self._nested = threading.local()  #: `ids`: what `_nested_references` says, per encoding thread
        #: the files of `Client.upload_file`, which every function stored from then on carries (payload/uploads.py)
        self._uploads: tuple[Upload, ...] = ()

    def add_upload(self, upload: Upload) -> None:
        """From now on every stored function carries `upload` too (one of the same file name is replaced); the
        functions stored before are stored again when next used."""
        self._uploads = (*(kept for kept in self._uploads if kept.filename != upload.filename), upload)
        self._functions.clear()

    def forget_stored(self) -> None:
        """After client.clear() (its objects deleted): everything is stored again, and tasks carry the next clear
        epoch."""
        self._objects.forget_all()
        self._clear_epoch = (self._clear_epoch + 1) % (1 << 32)
        self._functions.clear()
        self._large.clear()
        self._fingerprints.clear()
        self._undigested.clear()
        self._serializer_id = None

    def held_objects(self) -> list[tuple[ObjectID, Callable[[], Any], str]]:
        """What this client can store again (after object storage lost it): each function it holds (cached, still
        alive) and its serializer, as (object id, a call that serializes it again, name). The ids stay: the tasks
        already encoded name them."""
        held: list[tuple[ObjectID, Callable[[], Any], str]] = []
        for entry in list(self._functions.values()):
            function = entry.function()
            if function is not None:
                held.append((entry.object_id, functools.partial(self._serializer.serialize, function),
                             f"function {entry.name}"))  # fmt: skip
        if self._serializer_id is not None:
            held.append((self._serializer_id, functools.partial(DefaultSerializer.serialize, self._serializer),
                         "serializer"))  # fmt: skip
        return held

    def forget_contents(self) -> None:
        """Object storage lost this client's objects (it restarted), and the sink forgot them: an argument or object
        of the same content as one stored before is stored again, under its content id; the functions keep their ids
        (stored again by the caller, `held_objects`)."""
        self._large.clear()
        self._fingerprints.clear()
        self._undigested.clear()

    def serializer_id(self) -> ObjectID:
        """The id of the stored serializer the tasks name (empty for the default one, which processors have)."""
        if type(self._serializer) is DefaultSerializer:
            return ObjectID(b"")
        if self._serializer_id is None:
            self._serializer_id = self.put_object(DefaultSerializer.serialize(self._serializer), "serializer")
        return self._serializer_id

    def function(self, function: Any, refresh: bool = False) -> FunctionEntry:
        """The function's stored entry. A function is serialized once per client and then found by identity;
        `refresh` (the API's `reserialize=True`) serializes it again, for a callable changed in place."""
        entry = self._functions.get(id(function))
        if entry is not None and entry.function() is function and not refresh:
            return entry
        if not callable(function):
            raise TypeError(f"cannot submit {describe(function)}: it is not callable")
        if self._ship_local_modules:
            from scaler.payload.local_modules import register_local_modules

            register_local_modules()
        try:
            payload = self._serializer.serialize(WithUploads(function, self._uploads) if self._uploads else function)
        except Exception as error:
            raise TypeError(f"cannot serialize the function {_function_name(function)}: {error}") from error
        object_id = self.put_object(payload, f"function {_function_name(function)}")
        signature = _signature(function)
        entry = FunctionEntry(
            self._held(function), object_id, _function_name(function), _takes_profiling(function), signature,
            _arity(signature),
        )  # fmt: skip
        if len(self._functions) > 10_000:
            self._functions.clear()
        self._functions[id(function)] = entry
        return entry

    def _held(self, function: Any) -> Callable[[], Any]:
        """How the cache holds `function`: weakly when it can (the entry goes with the function: an id is unique only
        while its object lives), else strongly."""
        key = id(function)
        functions = self._functions

        def forget(reference: weakref.ref[Any]) -> None:
            entry = functions.get(key)
            if entry is not None and entry.function is reference:
                functions.pop(key, None)

        try:
            return weakref.ref(function, forget)
        except TypeError:
            return functools.partial(_same, function)

    def put_object(self, payload: bytes | Frames, name: str, later: bool = False) -> ObjectID:
        """Store the bytes (or frames) once per client: identical content gets the same id and is stored once.
        `later`: a task's argument, whose put may be pipelined (objects of 8 MiB and more are always stored at once).

        An object from 8 MiB on, or from 64 KiB on when storage reads back without a transfer (its host), whose
        fingerprint matches no object stored yet is new content: it is stored under a random id, without hashing it
        whole (U3's 100 KB arguments cost their sha256 on top of their write). Another object of that fingerprint
        comes: the digests of those stored are then taken, from their stored copies, and compared."""
        key = self._fingerprint(payload)
        if key is not None and key not in self._fingerprints:
            return self._put_new(payload, name, key, later)
        object_id = content_id(self._client_id, payload)
        known = self._found(object_id, key)
        if known is not None:
            return known
        self._objects.store(object_id, payload, name, later)
        return object_id

    def stored_id(self, payload: bytes | Frames) -> ObjectID:
        """The id this client's object of this content is (or would be) stored under: its content id, or the random
        id an object of equal content was stored under."""
        object_id = content_id(self._client_id, payload)
        known = self._found(object_id, self._fingerprint(payload))
        return object_id if known is None else known

    def _fingerprint(self, payload: bytes | Frames) -> bytes | None:
        """The payload's fingerprint when it may be stored under a random id (None: it is known by its content id)."""
        size = frames_size(payload)
        if size < UNHASHED_FROM_BYTES:
            return None
        if size < LARGE_OBJECT_BYTES and (self._stored is None or not self._stored.reads_locally()):
            return None
        return fingerprint(payload)

    def _found(self, digest: ObjectID, key: bytes | None) -> ObjectID | None:
        """The id of the object stored under a random id with this digest (the digests of those of this fingerprint
        stored without one are taken now from their stored copies)."""
        if key is None:
            return None
        self._digest_stored(key)
        return self._large.get(digest)

    def _digest_stored(self, key: bytes) -> None:
        """The digests of the objects of fingerprint `key` stored without one, from what storage holds (an object
        deleted meanwhile, or whose pipelined put is not stored yet, is forgotten: found again by its content id)."""
        if self._stored is None:
            return
        for object_id, as_list in self._undigested.pop(key, []):
            try:
                frames = self._stored.stored_frames(object_id)
            except Exception:  # storage unreachable: this object is not found again by its content (stored twice)
                frames = None
            if frames is not None:
                self._large[content_id(self._client_id, frames if as_list else frames[0])] = object_id

    def _put_new(self, payload: bytes | Frames, name: str, key: bytes, later: bool) -> ObjectID:
        """No stored object has this fingerprint, so this content is new: store it under a fresh id. Its digest, so
        that the same content sent again is not stored twice, is taken later from the stored copy when storage is on
        this host (read back without a transfer, only if another object of this fingerprint comes: a put of 100 MB
        then costs its write alone); elsewhere (objects from 8 MiB on) it is computed now on another thread while the
        object is sent (hashing 100 MB costs about as much as sending it)."""
        object_id = self._new_object_id()
        if self._stored is not None and self._stored.reads_locally():
            self._objects.store(object_id, payload, name, later and frames_size(payload) < LARGE_OBJECT_BYTES)
            self._undigested.setdefault(key, []).append((object_id, isinstance(payload, list)))
            self._fingerprints.add(key)
            return object_id
        digest: list[ObjectID] = []
        if sys.platform == "emscripten":  # no thread in a browser (Pyodide): hashed before it is sent
            digest.append(content_id(self._client_id, payload))
            self._objects.store(object_id, payload, name)
        else:
            hashing = threading.Thread(target=lambda: digest.append(content_id(self._client_id, payload)))
            hashing.start()
            try:
                self._objects.store(object_id, payload, name)
            finally:
                hashing.join()
        self._large[digest[0]] = object_id
        self._fingerprints.add(key)
        return object_id

    def _new_object_id(self) -> ObjectID:
        """A fresh id of this client's: its owner tag, 8 random bytes drawn once per encoder and a count (no system
        call per object: on U3's submit path each one was a chance for the client's other threads to take the GIL)."""
        number = next(self._id_numbers)
        if number >> 32:  # 4 billion ids of one base: draw another
            self._id_base, self._id_numbers = new_random_object_id()[:8], itertools.count(1)
            number = next(self._id_numbers)
        return ObjectID(self._owner_tag + self._id_base + number.to_bytes(4, "little"))

    def argument(self, value: Any, keyword: str, position: int) -> m.Argument:
        if type(value) in _SMALL_PLAIN and self._plain_pickles:  # most arguments: one pickle, inline
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            if len(data) <= INLINE_LIMIT_BYTES:
                return _NEW_ARGUMENT(m.ArgumentKind.INLINE, data, keyword)
        if isinstance(value, ObjectReference):
            return _NEW_ARGUMENT(m.ArgumentKind.OBJECT_ID, value.object_id, keyword, value.writable)
        if isinstance(value, CopyOnWrite):
            encoded = self.argument(value.value, keyword, position)
            if encoded.kind is m.ArgumentKind.OBJECT_ID:  # an inline value is the task's own copy anyway
                return dataclasses.replace(encoded, copy_on_write=True)
            return encoded
        if isinstance(value, concurrent.futures.Future):  # what Dask users write: say what works here instead
            which = f"keyword argument {keyword!r}" if keyword else f"argument {position}"
            raise TypeError(
                f"{which} is a future ({describe(value)}): pass its value (future.result()), or give the dependency to "
                "client.get as a graph, whose tasks' arguments may name other keys"
            )
        try:
            frames = noted_while(lambda: serialize_to_frames(self._serializer, value), self._nested_references())
            if frames_size(frames) <= INLINE_LIMIT_BYTES:
                return m.Argument(m.ArgumentKind.INLINE, one_payload(self._serializer, value, frames), keyword)
        except Exception as error:
            which = f"keyword argument {keyword!r}" if keyword else f"argument {position}"
            raise TypeError(f"cannot serialize {which} of type {describe(value)}: {error}") from error
        payload = frames if len(frames) > 1 else frames[0]
        object_id = self.put_object(payload, f"argument of {describe(value)}", later=True)
        return m.Argument(m.ArgumentKind.OBJECT_ID, object_id, keyword)

    def _nested_references(self) -> list[bytes]:
        """The ids of the references pickled inside the arguments encoded on this thread since its last task."""
        noted: list[bytes] | None = getattr(self._nested, "ids", None)
        if noted is None:
            noted = self._nested.ids = []
        return noted

    def arguments(self, args: Iterable[Any], kwargs: dict[str, Any]) -> tuple[m.Argument, ...]:
        self._nested.ids = None  # a task's arguments: what an earlier encoding that failed noted is not theirs
        encoded = [self.argument(value, "", position) for position, value in enumerate(args)]
        encoded.extend(self.argument(value, keyword, 0) for keyword, value in kwargs.items())
        return tuple(encoded)

    def task(
        self,
        task_id: TaskID,
        function: FunctionEntry,
        arguments: tuple[m.Argument, ...],
        *,
        profiling: bool,
        stream_output: bool,
        priority: int,
        capabilities: m.Capabilities,
        graph_id: bytes = b"",
        dependencies: tuple[TaskID, ...] = (),
        stream_credit: int = 0,
        actor_id: TaskID = TaskID(b""),  # noqa: B008 - an immutable value
        actor: m.ActorSpec | None = None,
    ) -> m.Task:
        """`stream_credit`: a streaming task's window; `actor_id`: the actor a call is for; `actor`: an actor's start
        (protocol: Task)."""
        body = codec.encode_body(
            _NEW_TASK_BODY(
                function.object_id, arguments, self.serializer_id(), profiling, stream_output, self._clear_epoch,
                self.log_forwarding,
            )
        )  # fmt: skip
        stored = _OBJECT_ID
        large_inputs = tuple([argument.data for argument in arguments if argument.kind is stored][:MAX_LARGE_INPUTS])
        nested: list[bytes] | None = getattr(self._nested, "ids", None)
        if nested:
            large_inputs = tuple(dict.fromkeys([*large_inputs, *nested]))[:MAX_LARGE_INPUTS]
        self._nested.ids = None
        return _NEW_TASK(
            task_id, self._client_id, body, function.name, priority, capabilities, GraphID(graph_id), dependencies,
            (), stream_credit, actor_id, actor, large_inputs,
        )  # fmt: skip


def _function_name(function: Any) -> str:
    if isinstance(function, functools.partial):  # a map's chunk runner: partial(run_chunk, fn)
        inner = function.args[0] if function.args and callable(function.args[0]) else function.func
        return _function_name(inner)
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    return str(name) if name else describe(function)


def _signature(function: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _arity(signature: inspect.Signature | None) -> int | None:
    if signature is None:
        return None
    plain = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.POSITIONAL_ONLY
    parameters = signature.parameters.values()
    if all(p.kind in plain and p.default is inspect.Parameter.empty for p in parameters):
        return len(signature.parameters)
    return None


def _takes_profiling(function: Any) -> bool:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    parameter = parameters.get("profiling")
    return parameter is not None and parameter.kind is not inspect.Parameter.POSITIONAL_ONLY
