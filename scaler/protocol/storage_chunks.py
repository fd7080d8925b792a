"""How an object's bytes are cut into the payload frames of a put or a get (storage_messages.py re-exports it).
Hand-written; it imports nothing generated."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = [
    "CHUNK_BYTES",
    "DIGEST_BYTES",
    "WIRE_PIECE_BYTES",
    "joined_pieces",
    "piece_digest",
    "piece_digests",
    "piece_lengths",
    "pieces_align",
    "split_chunks",
    "wire_pieces",
]

#: The length of a piece's digest (BLAKE2b): what a host cache checks of each piece another host sends it.
DIGEST_BYTES = 16

#: Largest payload frame; bigger objects are split into frames of this size.
CHUNK_BYTES = 256 * 1024 * 1024

#: Largest payload frame a CURVE-secured connection sends. libzmq encrypts a message whole before its first byte
#: leaves, and decrypts one only once its last byte has arrived: a 100 MB frame waits for a pass of encryption before
#: the transfer and for one of decryption after it, neither overlapping the transfer (over a 50 Mbit/s link, about a
#: second of a 16 s transfer on this machine). Cut into pieces of this size, the pieces are encrypted, sent and
#: decrypted one after another, overlapping: the transfer starts at once and ends one piece's decryption after its
#: last byte. A reader joins pieces again (`object_from_frames`, `serializer.deserialize_frames`).
WIRE_PIECE_BYTES = 1024 * 1024


def split_chunks(payload: bytes | memoryview) -> list[memoryview]:
    """Views of at most CHUNK_BYTES over the payload; no copy is made."""
    view = memoryview(payload).cast("B") if not isinstance(payload, memoryview) else payload.cast("B")
    if len(view) <= CHUNK_BYTES:
        return [view]
    return [view[offset : offset + CHUNK_BYTES] for offset in range(0, len(view), CHUNK_BYTES)]


def wire_pieces(frames: Sequence[Any], piece_bytes: int = WIRE_PIECE_BYTES) -> list[Any]:
    """The payload frames as a CURVE-secured connection sends them: each frame over `piece_bytes` as views of at most
    that size over it, in order (no copy; a view keeps its frame alive while ZeroMQ sends it); the others as is."""
    pieces: list[Any] = []
    for frame in frames:
        if len(frame) <= piece_bytes:
            pieces.append(frame)
            continue
        view = memoryview(frame).cast("B")
        pieces.extend(view[offset : offset + piece_bytes] for offset in range(0, len(view), piece_bytes))
    return pieces


def piece_lengths(frame_bytes: Sequence[int], piece_bytes: int = WIRE_PIECE_BYTES) -> list[int]:
    """The length of each piece `wire_pieces` cuts frames of these lengths into, in order (an empty frame is one
    empty piece)."""
    return [
        min(piece_bytes, length - start) for length in frame_bytes for start in (range(0, length, piece_bytes) or (0,))
    ]


def piece_digest(piece: Any) -> bytes:
    return hashlib.blake2b(piece, digest_size=DIGEST_BYTES).digest()


def piece_digests(frames: Sequence[Any]) -> tuple[bytes, ...]:
    """The digest of each piece `wire_pieces` cuts the frames into, in order."""
    return tuple(piece_digest(piece) for piece in wire_pieces(frames))


def joined_pieces(pieces: Sequence[Any], frame_bytes: Sequence[int]) -> list[Any] | None:
    """The frames `wire_pieces` cut into `pieces`, given the frames' lengths: a frame that came whole is its piece as
    it is, one that came in pieces those joined into a bytearray (one copy). None when the pieces do not add up to
    frames of exactly those lengths."""
    frames: list[Any] = []
    index = 0
    for length in frame_bytes:
        taken: list[Any] = []
        size = 0
        while size < length and index < len(pieces):
            taken.append(pieces[index])
            size += len(pieces[index])
            index += 1
        if size != length:
            return None
        if len(taken) == 1:
            frames.append(taken[0])
            continue
        joined = bytearray(length)
        offset = 0
        for piece in taken:
            joined[offset : offset + len(piece)] = piece
            offset += len(piece)
        frames.append(joined)
    return frames if index == len(pieces) else None


def pieces_align(pieces: Sequence[Any], frame_bytes: Sequence[int]) -> bool:
    """Whether `pieces` cut frames of exactly `frame_bytes` lengths (no piece straddles two frames), as `wire_pieces`
    cuts them; nothing is copied."""
    index = 0
    for length in frame_bytes:
        size = 0
        while size < length and index < len(pieces):
            size += len(pieces[index])
            index += 1
        if size != length:
            return False
    return index == len(pieces)
