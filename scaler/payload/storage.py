"""Where a payload travels: inside the message up to `INLINE_LIMIT_BYTES`, else through object storage, which
payload code reaches through `StorageAccess` (an ObjectStorageConnection, or a bundle's objects remotely)."""

from __future__ import annotations

from typing import Any, Protocol

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
