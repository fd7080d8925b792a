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


class DefaultSerializer(Serializer):
    """cloudpickle with the highest pickle protocol: functions and classes defined in __main__ travel by value."""

    @staticmethod
    def serialize(obj: Any) -> bytes:
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


def deserialize_with(serializer: Serializer, payload: bytes | bytearray | memoryview) -> Any:
    """Call a serializer's deserialize: the default one reads buffers directly, custom ones get a Payload."""
    if isinstance(serializer, DefaultSerializer) or type(serializer) is DefaultSerializer:
        return pickle.loads(payload)
    return serializer.deserialize(Payload(payload))
