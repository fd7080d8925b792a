"""The only module that turns messages into frames and back: the frame around the generated struct codec.

`encode(message) -> bytes` and `decode(frame) -> message` for the scheduler protocol (a Task and its body of the common
shape are written by task_frames.py, byte for byte as the generated codec writes them, at less than half the cost; such
a Task and a TaskResult are read by task_frames.py and result_frames.py as the generated codec reads them);
`encode_body`/`decode_body` for the TaskBody nested in a Task; `encode_storage_*`/`decode_storage_*`
for the object storage headers. The fields of each struct are written and read by codec_structs.py, generated
from the schemas (python -m scaler.protocol.generate). Any frame that cannot be decoded raises `DecodeError`,
whose text names what was wrong; callers log it and answer with a ProtocolError instead of crashing. `split(frame)`
gives the messages of a frame that holds several back to back (Cap'n Proto's stream framing: a sender's batch of small
messages as one ZeroMQ part).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeVar

from scaler.protocol import codec_structs as cs
from scaler.protocol import messages as m
from scaler.protocol import schemas
from scaler.protocol import storage_messages as sm
from scaler.protocol.result_frames import RESULT_START, read_result_frame
from scaler.protocol.task_frames import COMMON_TASK_START, body_frame, read_task_frame, task_frame

_schema = schemas.MESSAGE
_storage_schema = schemas.STORAGE
#: each member of the envelope by its name: its field object (a read by it costs 0.6 of one by name) and its reader
_ENVELOPE = {which: (schemas.field_of("m", f"Message.{name}"), read) for which, (name, read) in cs.READERS.items()}

#: A frame may make the reader visit at most this many words per word it holds (plus a little): a decoder
#: reads a field more than once, but a frame that claims far more than it holds (a list of 222 million empty
#: structs in 48 bytes) is refused at once instead of keeping a server busy for minutes.
_WORDS_VISITED_PER_WORD = 8
_WORDS_VISITED_MINIMUM = 8192


def _limit(frame: bytes) -> int:
    """The traversal limit of one frame: in proportion to its size (Cap'n Proto counts each element of a list
    of empty structs as one word, so a claimed list length costs what it claims)."""
    return _WORDS_VISITED_PER_WORD * (len(frame) // 8) + _WORDS_VISITED_MINIMUM


class DecodeError(ValueError):
    """A frame that is not a valid message of this protocol."""


_FORWARDABLE = (m.Task, m.TaskResult)
#: How `decode` sets the slots of a frozen value it has just made (each slot's member descriptor: `object.__setattr__`
#: looks the name up on the type first, about twice the cost)
_SET_TASK_WIRE = vars(m.Task)["wire"].__set__
_SET_TASK_BODY = vars(m.Task)["body"].__set__
_SET_RESULT_WIRE = vars(m.TaskResult)["wire"].__set__


def encode(message: m.Message) -> bytes:
    if isinstance(message, _FORWARDABLE) and message.wire is not None:
        return message.wire  # forwarded unchanged: no need to build it again
    if type(message) is m.Task:  # each client submission: written directly when it has the common shape
        frame = task_frame(message)
        if frame is not None:
            return frame
    name, write = cs.WRITERS[type(message)]
    envelope = _schema.Message.new_message()
    write(envelope.init(name), message)
    return bytes(envelope.to_bytes())


#: a message's first word: its segment count less one, then its first segment's size in words
_HEAD = struct.Struct("<II")
#: more segments than any message of ours has (a 3 MB inline payload has two): a frame that says so is not ours
_MOST_SEGMENTS = 512


def split(frame: bytes) -> list[bytes]:
    """The messages of a frame: the frame itself when it holds one, else each of the messages it holds back to back
    (Cap'n Proto's stream framing: each message's segment table gives its length). A sender may join a batch of
    messages into one ZeroMQ part (`scaler.io.zmq_parts.joined`): ZeroMQ's cost, and CURVE's, are per part, not per
    byte. Raises DecodeError when the lengths do not add up to the frame's (truncated or not ours)."""
    end = len(frame)
    at = 0
    parts: list[bytes] = []
    while at < end:
        if end - at < 8:
            raise DecodeError(f"not a valid protocol frame ({end} bytes): {end - at} bytes after its last message")
        count, first = _HEAD.unpack_from(frame, at)
        if count == 0:  # one segment: the common message
            size = 8 + 8 * first
        elif count < _MOST_SEGMENTS:
            count += 1
            table = 4 + 4 * count
            table += table & 4  # padded to a word
            if end - at < table:
                raise DecodeError(f"not a valid protocol frame ({end} bytes): a segment table cut short")
            size = table + 8 * sum(struct.unpack_from(f"<{count}I", frame, at + 4))
        else:
            raise DecodeError(f"not a valid protocol frame ({end} bytes): a message of {count + 1} segments")
        if at == 0 and size == end:
            return [frame]
        if size > end - at:
            raise DecodeError(f"not a valid protocol frame ({end} bytes): a message of {size} bytes at byte {at}")
        parts.append(frame[at : at + size])  # a copy of its own: word-aligned, as Cap'n Proto needs
        at += size
    return parts


def decode(frame: bytes | memoryview, forwarding: bool = False) -> m.Message:
    """`forwarding`: the caller keeps one copy of a Task's bytes (the scheduler): an actor's call, sent on unchanged,
    keeps its frame (`wire`) and not its body (such a Task must not be changed with `replace`); a Task of another
    shape than the common one keeps its body and not its frame (the scheduler queues a task as its body and fields,
    and writes it again when it dispatches it). A Task of the common shape keeps both (the scheduler sends one it
    dispatches in the step it came as its frame, and queues its body), and a TaskResult its frame; both are read
    without pycapnp (task_frames.py, result_frames.py), any other frame through the generated codec."""
    if not isinstance(frame, bytes):
        frame = bytes(frame)  # Cap'n Proto needs word-aligned data; bytes objects are, zmq buffers may not be
    if frame.startswith(COMMON_TASK_START, 8) and (task := read_task_frame(frame)):
        return task
    if frame.startswith(RESULT_START, 8) and (result := read_result_frame(frame)):
        return result
    return _decode_message(frame, forwarding)


def _decode_message(frame: bytes, forwarding: bool) -> m.Message:
    """`decode` through the generated codec."""
    try:
        # read_multiple_bytes reads the same unpacked encoding as from_bytes, without a context manager
        message: m.Message | None = None
        limit = _WORDS_VISITED_PER_WORD * (len(frame) // 8) + _WORDS_VISITED_MINIMUM  # `_limit(frame)`, inline
        for envelope in _schema.Message.read_multiple_bytes(frame, traversal_limit_in_words=limit):
            if message is not None:
                raise DecodeError(f"not a valid protocol message ({len(frame)} bytes): it holds several messages")
            # the member is read by its field object, not by a name (getattr with a fresh string leaves that string in
            # CPython's type attribute cache, where hundreds of them, allocated among a big queue's tasks, kept its
            # memory from going back after it drained). `_which_str` and `_get_by_field`: a reader's attributes go
            # through `__getattr__`, the fallback after the normal lookup failed, several times their cost (and
            # `_which()` builds an enum object)
            field, read = _ENVELOPE[envelope._which_str()]
            message = read(envelope._get_by_field(field))
        if message is None:
            raise DecodeError(f"not a valid protocol message ({len(frame)} bytes): no message in it")
        kind = type(message)
        if kind is m.Task:
            if not forwarding:
                _SET_TASK_WIRE(message, frame)
            elif message.actor_id:  # type: ignore[union-attr]  # an actor's call, sent on as it came: one copy is enough
                _SET_TASK_WIRE(message, frame)
                _SET_TASK_BODY(message, b"")
            # else a task the scheduler queues: kept as its body and fields, its frame written again when it is sent
        elif kind is m.TaskResult:
            _SET_RESULT_WIRE(message, frame)
        return message
    except DecodeError:
        raise
    except Exception as error:  # capnp raises several unrelated types for malformed input
        raise DecodeError(f"not a valid protocol message ({len(frame)} bytes): {error}") from None


# ---------------------------------------------------------------- task bodies and storage headers


def encode_body(body: m.TaskBody) -> bytes:
    frame = body_frame(body)  # the same bytes, written directly (task_frames.py); None: a shape it leaves to pycapnp
    return frame if frame is not None else _encode(_schema.TaskBody, cs.write_task_body, body)


def decode_body(data: bytes) -> m.TaskBody:
    """As `_decode`, read as `decode` reads a message (read_multiple_bytes: no context manager, a fifth of the cost
    of from_bytes's): a processor decodes a body per task."""
    if not isinstance(data, bytes):
        data = bytes(data)  # see decode()
    try:
        body: m.TaskBody | None = None
        for reader in _schema.TaskBody.read_multiple_bytes(data, traversal_limit_in_words=_limit(data)):
            if body is not None:
                raise DecodeError(f"not a valid task body ({len(data)} bytes): it holds several")
            body = cs.read_task_body(reader)
        if body is None:
            raise DecodeError(f"not a valid task body ({len(data)} bytes): none in it")
        return body
    except DecodeError:
        raise
    except Exception as error:
        raise DecodeError(f"not a valid task body ({len(data)} bytes): {error}") from None


def encode_storage_request(request: sm.StorageRequest) -> bytes:
    return _encode(_storage_schema.StorageRequest, cs.write_storage_request, request)


def decode_storage_request(frame: bytes | memoryview) -> sm.StorageRequest:
    return _decode(_storage_schema.StorageRequest, cs.read_storage_request, frame, "storage request")


def encode_storage_reply(reply: sm.StorageReply) -> bytes:
    return _encode(_storage_schema.StorageReply, cs.write_storage_reply, reply)


def decode_storage_reply(frame: bytes | memoryview) -> sm.StorageReply:
    return _decode(_storage_schema.StorageReply, cs.read_storage_reply, frame, "storage reply")


_Value = TypeVar("_Value")


def _encode(struct: Any, write: Callable[[Any, _Value], None], value: _Value) -> bytes:
    builder = struct.new_message()
    write(builder, value)
    return bytes(builder.to_bytes())


def _decode(struct: Any, read: Callable[[Any], _Value], frame: bytes | memoryview, what: str) -> _Value:
    if not isinstance(frame, bytes):
        frame = bytes(frame)  # see decode()
    try:
        with struct.from_bytes(frame, traversal_limit_in_words=_limit(frame)) as reader:
            return read(reader)
    except Exception as error:
        raise DecodeError(f"not a valid {what} ({len(frame)} bytes): {error}") from None


__all__ = [
    "DecodeError",
    "decode",
    "decode_body",
    "decode_storage_reply",
    "decode_storage_request",
    "encode",
    "encode_body",
    "encode_storage_reply",
    "encode_storage_request",
]
