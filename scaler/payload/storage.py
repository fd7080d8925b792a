"""Where a payload travels: inside the message up to `INLINE_LIMIT_BYTES`, else through object storage, which
payload code reaches through `StorageAccess` (an ObjectStorageConnection, or a bundle's objects remotely)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

#: Arguments and results up to this size travel inside the task or result message; bigger ones go to object
#: storage. Exceptions travel inline whatever their size.
INLINE_LIMIT_BYTES = 64 * 1024


class StorageAccess(Protocol):
    """What decoding a task and writing its result need from object storage."""

    def get(self, object_id: bytes) -> bytes | bytearray | memoryview: ...
    def get_frames(self, object_id: bytes, copy_on_write: bool = False) -> list[memoryview]:
        """The object's frames; from a segment file of the storage's host, views of a read-only map shared with every
        process that maps it, or with `copy_on_write` of a private one (writable: a page written is copied first)."""
        ...

    def put(self, object_id: bytes, payload: Any, owner_id: bytes = b"", name: str = "") -> None: ...
    def exists(self, object_id: bytes) -> bool: ...


@runtime_checkable
class ReadsInParts(Protocol):
    """A storage connection that reads an object over its socket as it comes (an ObjectStorageConnection): the
    reader copies each piece to its place while the next ones cross (`serializer.deserialize_source`)."""

    def maps_objects(self) -> bool:
        """Objects are mapped from the server's segment directory here (this process is on its host)."""
        ...

    def read_in_parts(self, object_id: bytes, consume: Callable[[Any], T]) -> T: ...


@runtime_checkable
class ReadsTogether(Protocol):
    """A storage connection that maps several objects asked for at once (an ObjectStorageConnection): a host cache
    fetches those it lacks side by side (`task_decoder.TaskDecoder._map_together`)."""

    def map_together(self, object_ids: Sequence[bytes]) -> dict[bytes, list[memoryview]]: ...


@runtime_checkable
class FollowsPuts(Protocol):
    """A storage connection that stores a large object while readers already follow it (an ObjectStorageConnection on
    the storage's host: object_storage/followed_put.py): the object may be announced as soon as this returns True."""

    def put_followed(self, object_id: bytes, payload: Any, owner_id: bytes = b"", name: str = "") -> bool: ...
