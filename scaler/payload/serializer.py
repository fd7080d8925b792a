"""Serializers: how functions, arguments and results become bytes and back.

A `Serializer` has two static methods. The client's serializer is stored once in object storage
and used by workers too: for the function, each argument, and the result.
"""

from __future__ import annotations

import abc
import pickle
from typing import Any

import cloudpickle


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


class DefaultSerializer(Serializer):
    """cloudpickle with the highest pickle protocol: functions and classes defined in __main__ travel by value."""

    @staticmethod
    def serialize(obj: Any) -> bytes:
        if type(obj) in _PLAIN_TYPES:  # same bytes as cloudpickle's, about ten times sooner
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


def serialize_to_frames(serializer: Serializer, obj: Any) -> list[Any]:
    """The frames an object is stored as: one serialized payload, or for a large `bytes` object with
    the default serializer, a marker and the object itself (sent and hashed without being copied)."""
    if type(obj) is bytes and len(obj) >= RAW_BYTES_THRESHOLD and type(serializer) is DefaultSerializer:
        return [RAW_BYTES_MARKER, obj]
    return [serializer.serialize(obj)]


def deserialize_frames(serializer: Serializer, frames: list[memoryview]) -> Any:
    """The object stored as these frames (see serialize_to_frames)."""
    if len(frames) >= 2 and frames[0] == RAW_BYTES_MARKER:
        if len(frames) == 2:
            return bytes(frames[1])
        return b"".join(frames[1:])
    if len(frames) == 1:
        return deserialize_with(serializer, frames[0])
    return deserialize_with(serializer, b"".join(frames))


def deserialize_with(serializer: Serializer, payload: bytes | bytearray | memoryview) -> Any:
    """Call a serializer's deserialize: the default one reads buffers directly, custom ones get a Payload."""
    if isinstance(serializer, DefaultSerializer) or type(serializer) is DefaultSerializer:
        return pickle.loads(payload)
    return serializer.deserialize(Payload(payload))
