"""A TaskResult's frame read directly, without pycapnp: the scheduler reads every result a processor sends (its id,
status, worker and run stamps) and forwards the frame as it came.

Through pycapnp a result's read is a message reader, a call per field and a struct reader for each of its run stamps
and profile. This reader follows Cap'n Proto's unpacked encoding itself for the frames a writer of this schema makes:
one segment, the Message's root and its TaskResult's pointer as any writer lays them (Message: 1 data word and 1
pointer; TaskResult: 3 and 6, at once after it), each of the TaskResult's pointers null, a byte list (its Data and Text
fields) or a struct (its profile and run stamps) whose words lie inside the segment, in any order; where the pointers of
a result lead is worked out once for the results whose pointers are the same (`_LAYOUTS`). What it gives is what the
generated reader gives (tests/unit/test_result_frames.py compares them); any other frame (several segments, a far or
negative pointer, a Text without its NUL, a status or union member this side does not know) is left to the generated
codec (None).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from scaler.protocol import messages as m
from scaler.protocol.frozen_values import constructor
from scaler.protocol.ids import TaskID

_MESSAGE_ROOT = (1 << 32) | (1 << 48)  #: a struct pointer at offset 0 to Message (1 data word, 1 pointer)
_MESSAGE_TASK_RESULT = 7  #: Message's union discriminant of `taskResult`
_RESULT_POINTER = (3 << 32) | (6 << 48)  #: TaskResult's struct pointer: offset 0, 3 data words, 6 pointers
#: the words a result's frame starts with after its segment table
RESULT_START = struct.pack("<3Q", _MESSAGE_ROOT, _MESSAGE_TASK_RESULT, _RESULT_POINTER)
#: the segment table; TaskResult's data: status, the payload's union discriminant, stored bytes, streamed values
_WORDS = struct.Struct("<II24xHH4xQQ")
_POINTERS = struct.Struct("<12I")  #: TaskResult's 6 pointers as two halves each
_FIRST_POINTER = 6  #: the word (after the segment table) of TaskResult's first pointer
_POINTERS_AT = 8 + 8 * _FIRST_POINTER  #: their first byte
_BYTE_LIST = 2  #: a list pointer's element size: one byte
_STATUS = tuple(m.ResultStatus)  #: by the enum's ordinal on the wire
_PAYLOADS = (m.PayloadKind.NONE, m.PayloadKind.INLINE, m.PayloadKind.OBJECT_ID)  #: by the union's discriminant
_STAMPS = struct.Struct("<ddI4xd")  #: RunStamps' 4 data words: started, finished, the processor's pid, received
_PROFILE_WORDS = struct.Struct("<ddQ")  #: Profile's 3 data words: duration, CPU seconds, peak memory bytes
_NEW_RESULT = constructor(m.TaskResult)
_NEW_STAMPS = constructor(m.RunStamps)
_NEW_PROFILE = constructor(m.Profile)
_SET_WIRE = vars(m.TaskResult)["wire"].__set__
_NO_PROFILE = m.Profile()
#: Where the blobs and structs of a result are, by its 6 pointers' words (`_layout`): kept for the few layouts a
#: cluster's results have (its results of one size alike)
_LAYOUTS: dict[bytes, _Layout | None] = {}
MAX_LAYOUTS = 1024  #: layouts kept (past it the table starts again)


class _Layout(NamedTuple):
    """Byte offsets in a frame whose pointers are these (a blob: start and stop; a struct: its data's start, 0 when
    null, and its data words)."""

    task_id: tuple[int, int]
    error: tuple[int, int] | None  #: None when null
    payload: tuple[int, int]
    profile: tuple[int, int]
    worker_id: tuple[int, int]
    ran: tuple[int, int]
    frame_bytes: int  #: the least size of a frame that holds all of them


def read_result_frame(frame: bytes) -> m.TaskResult | None:
    """The TaskResult of `frame`, which it keeps (`wire`: forwarded unchanged); None for a frame the generated codec
    reads (the module's header says which)."""
    if len(frame) < _POINTERS_AT + 48 or not frame.startswith(RESULT_START, 8):
        return None
    count, end, status, which, stored_bytes, streamed = _WORDS.unpack_from(frame)
    words = frame[_POINTERS_AT : _POINTERS_AT + 48]
    layout = _LAYOUTS.get(words, _UNKNOWN)
    if layout is _UNKNOWN:
        layout = _layout(words)
    if (
        layout is None
        or count
        or 8 + 8 * end != len(frame)
        or layout.frame_bytes > len(frame)
        or status >= len(_STATUS)
        or which >= len(_PAYLOADS)
    ):
        return None
    error_message = ""
    if layout.error is not None:  # a Text: its bytes and a NUL
        start, stop = layout.error
        if stop == start or frame[stop - 1] != 0:
            return None
        if stop - start > 1:
            try:
                error_message = frame[start : stop - 1].decode()
            except UnicodeDecodeError:
                return None
    start, stop = layout.payload
    payload = frame[start:stop] if which else b""
    profile = _NO_PROFILE
    start, size = layout.profile
    if start:
        profile = _NEW_PROFILE(*_PROFILE_WORDS.unpack(_data_words(frame, start, size, 3)))
    ran = None
    start, size = layout.ran
    if start:
        ran = _NEW_STAMPS(
            *(_STAMPS.unpack_from(frame, start) if size >= 4 else _STAMPS.unpack(_data_words(frame, start, size, 4)))
        )
    task_id, worker_id = layout.task_id, layout.worker_id
    result = _NEW_RESULT(
        TaskID(frame[task_id[0] : task_id[1]]),
        _STATUS[status],
        _PAYLOADS[which],
        payload,
        error_message,
        profile,
        frame[worker_id[0] : worker_id[1]],
        ran,
        stored_bytes,
        streamed,
    )
    _SET_WIRE(result, frame)
    return result


_NULL = (0, 0)  #: a null Data's bytes: none (frame[0:0])
_UNKNOWN = _Layout((0, 0), None, (0, 0), (0, 0), (0, 0), (0, 0), 0)


def _data_words(frame: bytes, start: int, size: int, wanted: int) -> bytes:
    """A struct's first `wanted` data words from `start`, of which it has `size` (those it lacks read as zeros)."""
    if size >= wanted:
        return frame[start : start + 8 * wanted]
    return frame[start : start + 8 * size] + bytes(8 * (wanted - size))


def _layout(words: bytes) -> _Layout | None:
    """The layout these pointers give (kept in `_LAYOUTS`); None when one is not null, a forward byte list (Data,
    Text) or a forward struct pointer where the schema has one (a far, negative or other pointer)."""
    halves = _POINTERS.unpack(words)
    ends = [0]
    blobs: list[tuple[int, int] | None] = []
    structs: list[tuple[int, int]] = []
    for index in range(6):
        low, high = halves[2 * index], halves[2 * index + 1]
        at = 8 + 8 * (_FIRST_POINTER + index + 1 + (low >> 2))  #: the byte it points to
        if index in (3, 5):  # profile, ran: a struct
            if not low and not high:
                structs.append((0, 0))
            elif low & 0x80000003:  # not a forward struct pointer
                return _keep(words, None)
            else:
                structs.append((at, high & 0xFFFF))
                ends.append(at + 8 * ((high & 0xFFFF) + (high >> 16)))
        elif not low and not high:
            blobs.append(None)
        elif low & 0x80000003 != 1 or high & 7 != _BYTE_LIST:  # not a forward list pointer of bytes
            return _keep(words, None)
        else:
            blobs.append((at, at + (high >> 3)))
            ends.append(at + (high >> 3))
    task_id, error, payload, worker_id = blobs
    layout = _Layout(
        task_id or _NULL, error, payload or _NULL, structs[0], worker_id or _NULL, structs[1], max(ends)
    )  # fmt: skip
    return _keep(words, layout)


def _keep(words: bytes, layout: _Layout | None) -> _Layout | None:
    if len(_LAYOUTS) >= MAX_LAYOUTS:
        _LAYOUTS.clear()
    _LAYOUTS[words] = layout
    return layout
