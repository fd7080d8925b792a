"""Serializers: how functions, arguments and results become bytes and back.

A `Serializer` has two static methods. The client's serializer is stored once in object storage
and used by workers too: for the function, each argument, and the result.
"""

from __future__ import annotations

import abc
import io
import pickle
import struct
from collections.abc import Sequence
from typing import Any, Protocol

import cloudpickle

from scaler.payload.code_filenames import keep_code_filenames

keep_code_filenames()


class Serializer(abc.ABC):
    @staticmethod
    @abc.abstractmethod
    def serialize(obj: Any) -> bytes:
        """The bytes of `obj` (a function, an argument or a result)."""

    @staticmethod
    @abc.abstractmethod
    def deserialize(payload: bytes) -> Any:
        """The object whose bytes are `payload`."""


#: Types whose values cloudpickle pickles exactly as pickle does: they go through the C pickler directly.
_PLAIN_TYPES = frozenset({int, float, str, bytes, bool, type(None), complex})
#: A tuple or list of at most this many values of `_PLAIN_TYPES` goes through the C pickler directly too (a task's
#: `return value, seconds`): cloudpickle's pickler, made in Python for each call, costs several times the pickling.
_PLAIN_ITEMS = 16


def _plain(obj: Any) -> bool:
    """Whether cloudpickle would pickle `obj` exactly as pickle does, as far as a glance tells (same bytes)."""
    kind = type(obj)
    if kind in _PLAIN_TYPES:
        return True
    if (kind is tuple or kind is list) and len(obj) <= _PLAIN_ITEMS:
        plain = _PLAIN_TYPES
        return all(type(item) in plain for item in obj)
    return False


class DefaultSerializer(Serializer):
    """cloudpickle with the highest pickle protocol: functions and classes defined in __main__ travel by value."""

    @staticmethod
    def serialize(obj: Any) -> bytes:
        if _plain(obj):  # same bytes as cloudpickle's, about ten times sooner
            return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        payload: bytes = cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        return payload

    @staticmethod
    def deserialize(payload: bytes) -> Any:
        return pickle.loads(payload)


class TagByte(int):
    """One byte of a `Payload`: an int that also equals (and hashes like) its one-byte bytes form.

    So `payload[0] == 71` and `payload[0] == b"G"` both hold, and `SomeEnum(payload[0])` finds a member
    whose value is `b"G"`, as tag-byte serializers written against bytes expect (the documented
    custom-serializer example does exactly this)."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (bytes, bytearray)):
            return len(other) == 1 and other[0] == int(self)
        return int.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(bytes((int(self),)))


class Payload(bytes):
    """The bytes handed to a custom `Serializer.deserialize`. Slices are plain bytes."""

    def __getitem__(self, index: Any) -> Any:
        item = bytes.__getitem__(self, index)
        return TagByte(item) if isinstance(item, int) else item


#: First frame of a large `bytes` object stored as is, without pickling (no pickle stream starts with 0).
RAW_BYTES_MARKER = b"\x00scaler:raw-bytes"
#: From this size, `bytes` sent with the default serializer travel as raw frames (no pickle copy).
RAW_BYTES_THRESHOLD = 1024 * 1024
#: First frame of an object pickled with protocol 5 out-of-band buffers, followed by the length (u64) of the pickle
#: stream and of each buffer; the frames after it are the stream, then the buffers. (A writer may cut a frame into
#: chunks, as puts over the socket do from 256 MiB on: the lengths put them back together.)
PICKLE5_MARKER = b"\x00scaler:pickle5"
_LENGTH = struct.Struct("<Q")
#: Buffers from this size go out of band (their own frame: no copy into the pickle stream, and a reader that maps the
#: object builds the value on the map); smaller ones stay in the stream.
OUT_OF_BAND_FROM_BYTES = 4096


def serialize_to_frames(serializer: Serializer, obj: Any) -> list[Any]:
    """The frames an object is stored as. With the default serializer: a large `bytes` object is a marker and the
    object itself (sent and hashed without being copied); an object with large buffers that pickle protocol 5 can
    take out of band (numpy arrays, pandas frames' blocks, `pickle.PickleBuffer`) is a marker, the pickle stream and
    each buffer as a view of the object's own memory (no copy); anything else is one pickle. A custom serializer's
    object is one frame, its `serialize`."""
    if type(serializer) is not DefaultSerializer:
        return [serializer.serialize(obj)]
    if type(obj) is bytes and len(obj) >= RAW_BYTES_THRESHOLD:
        return [RAW_BYTES_MARKER, obj]
    if _plain(obj):
        return [pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)]
    buffers: list[memoryview] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        """False (out of band) for a large contiguous buffer, kept as a view; True (in the stream) otherwise."""
        try:
            view = buffer.raw()
        except BufferError:  # not contiguous: pickled in the stream
            return True
        if view.nbytes < OUT_OF_BAND_FROM_BYTES:
            return True
        buffers.append(view)
        return False

    stream: bytes = cloudpickle.dumps(obj, protocol=5, buffer_callback=out_of_band)
    if not buffers:
        return [stream]
    lengths = b"".join(_LENGTH.pack(part.nbytes) for part in [memoryview(stream), *buffers])
    return [PICKLE5_MARKER + lengths, stream, *buffers]


def deserialize_frames(serializer: Serializer, frames: list[memoryview]) -> Any:
    """The object stored as these frames (see serialize_to_frames). Out-of-band buffers are used as they are: a
    value read from a read-only map (a segment file) is read-only, one from a private map writable. After the first
    frame, a frame may come cut into pieces (a chunked put, a CURVE get's `storage_chunks.wire_pieces`): they are
    joined here, in the one copy a large `bytes` object needs anyway."""
    if len(frames) >= 2 and bytes(frames[0][: len(PICKLE5_MARKER)]) == PICKLE5_MARKER:
        stream, *buffers = _regrouped(frames)
        return pickle.loads(stream, buffers=buffers)
    if len(frames) >= 2 and frames[0] == RAW_BYTES_MARKER:
        if len(frames) == 2:
            return bytes(frames[1])
        return b"".join(frames[1:])
    if len(frames) == 1:
        return deserialize_with(serializer, frames[0])
    return deserialize_with(serializer, b"".join(frames))


def _regrouped(frames: list[memoryview]) -> list[memoryview]:
    """The pickle stream and the buffers of a PICKLE5_MARKER object, each a frame as it is (no copy) unless a writer
    cut it into chunks (joined then)."""
    lengths = [length for (length,) in _LENGTH.iter_unpack(frames[0][len(PICKLE5_MARKER) :])]
    parts = frames[1:]
    if [len(part) for part in parts] == lengths:
        return parts
    regrouped: list[memoryview] = []
    index = 0
    for length in lengths:
        pieces = []
        while length > 0:
            piece = parts[index]
            index += 1
            pieces.append(piece)
            length -= len(piece)
        # joined into a bytearray: writable, as a frame that came whole and was copied on write is
        regrouped.append(pieces[0] if len(pieces) == 1 else memoryview(bytearray().join(pieces)))
    return regrouped


class FrameSource(Protocol):
    """An object's frames as they come (a get answered in parts, `ObjectStorageConnection.read_in_parts`)."""

    @property
    def frame_bytes(self) -> Sequence[int]:
        """The lengths of the object's frames, in order."""

    def readinto(self, view: memoryview) -> int:
        """Copies the next bytes of the frames (concatenated, in order) into `view`, waiting for them to come;
        returns how many (0: nothing is left)."""


class _SourceAsRaw(io.RawIOBase):
    """A FrameSource as a raw stream, for io.BufferedReader."""

    def __init__(self, source: FrameSource) -> None:
        super().__init__()
        self._source = source

    def readable(self) -> bool:
        return True

    def readinto(self, view: Any) -> int:
        return self._source.readinto(memoryview(view).cast("B"))


def deserialize_source(serializer: Serializer, source: FrameSource) -> Any:
    """The object stored as frames of `source.frame_bytes` (see serialize_to_frames), read from `source` as they come:
    each frame is copied once, into its place, while the next pieces are still on their way (a large `bytes` object
    into the bytes object itself, by io.BufferedReader, which reads into the object it returns), so that nothing is
    left to copy once the last piece has come. The same value as `deserialize_frames` of the frames."""
    lengths = list(source.frame_bytes)
    if len(lengths) >= 2 and lengths[0] == len(RAW_BYTES_MARKER):
        first = _read_exactly(source, lengths[0])
        if first == RAW_BYTES_MARKER:
            size = sum(lengths[1:])
            value = io.BufferedReader(_SourceAsRaw(source), buffer_size=64 * 1024).read(size)
            if len(value) != size:
                raise ValueError(f"the object ended after {len(value):,} of its {size:,} bytes")
            return value
        frames = [first, *(_read_exactly(source, length) for length in lengths[1:])]
    else:
        frames = [_read_exactly(source, length) for length in lengths]
    return deserialize_frames(serializer, frames)


def _read_exactly(source: FrameSource, length: int) -> memoryview:
    view = memoryview(bytearray(length))
    offset = 0
    while offset < length:
        count = source.readinto(view[offset:])
        if count <= 0:
            raise ValueError(f"the object ended after {offset:,} of a frame's {length:,} bytes")
        offset += count
    return view


def one_payload(serializer: Serializer, obj: Any, frames: list[Any]) -> bytes:
    """The object as one payload (inside a message: an inline argument or result): the single frame, or the object
    pickled again with its buffers in the stream."""
    if len(frames) == 1:
        return bytes(frames[0]) if not isinstance(frames[0], bytes) else frames[0]
    return serializer.serialize(obj)


def deserialize_with(serializer: Serializer, payload: bytes | bytearray | memoryview) -> Any:
    """Call a serializer's deserialize: the default one reads buffers directly, custom ones get a Payload."""
    if isinstance(serializer, DefaultSerializer) or type(serializer) is DefaultSerializer:
        return pickle.loads(payload)
    return serializer.deserialize(Payload(payload))
