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
    def get_frames(self, object_id: bytes) -> list[memoryview]: ...
    def put(self, object_id: bytes, payload: Any, owner_id: bytes = b"", name: str = "") -> None: ...
    def exists(self, object_id: bytes) -> bool: ...
