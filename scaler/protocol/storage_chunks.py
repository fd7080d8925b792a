"""How an object's bytes are cut into the payload frames of a put or a get (storage_messages.py re-exports it).
Hand-written; it imports nothing generated."""

from __future__ import annotations

__all__ = ["CHUNK_BYTES", "split_chunks"]

#: Largest payload frame; bigger objects are split into frames of this size.
CHUNK_BYTES = 256 * 1024 * 1024


def split_chunks(payload: bytes | memoryview) -> list[memoryview]:
    """Views of at most CHUNK_BYTES over the payload; no copy is made."""
    view = memoryview(payload).cast("B") if not isinstance(payload, memoryview) else payload.cast("B")
    if len(view) <= CHUNK_BYTES:
        return [view]
    return [view[offset : offset + CHUNK_BYTES] for offset in range(0, len(view), CHUNK_BYTES)]
