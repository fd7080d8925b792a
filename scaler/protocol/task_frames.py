"""The frames of a Task and of its TaskBody written directly, for the shape every client submission has; byte for byte
what the generated codec writes through pycapnp (codec_structs.write_task, write_task_body), at a fraction of its cost.

A client encodes each task it submits twice (its body, then the Task that carries it): through pycapnp that is a
message builder, a field set per field and a copy out, about 15 us a task here, half of what `submit` costs a tiny
task. These writers lay the words out as pycapnp does (Cap'n Proto's unpacked encoding, one segment, each blob
allocated after the struct in the order the generated writer sets it), so a frame is the same whichever wrote it
(tests/unit/test_task_frames.py compares them). A value outside that shape (capabilities, a graph's fields, an actor's
start, forwarded logging) is not written here: the callers fall back to the generated codec (None). The scheduler
writes each task it dispatches again (it keeps no frame of a queued task): a plain task's words but two are the same
for every task of one function, priority and stream credit, so they are packed once for those (`_HEADS`).

`read_task_frame` reads a frame of that common shape back without pycapnp (the scheduler decodes every task a client
submits): a frame laid out word for word as `task_frame` lays it out gives the Task the generated codec would read from
it; any other frame, whatever its writer, is left to the generated codec (None).
"""

from __future__ import annotations

import struct
import sys

from scaler.protocol import messages as m
from scaler.protocol.codec_fields import shared
from scaler.protocol.frozen_values import constructor
from scaler.protocol.ids import ClientID, GraphID, TaskID

_WORD = struct.Struct("<Q")
_PAD = (b"", b"\0" * 7, b"\0" * 6, b"\0" * 5, b"\0" * 4, b"\0" * 3, b"\0" * 2, b"\0")  #: zeros to the next word
_BYTE_LIST = 2  #: a list pointer's element size: one byte (Data, Text)
#: A struct pointer at offset 0 (its struct follows it): TaskBody (2 data words, 4 pointers), Message (1, 1),
#: Task (1, 12)
_BODY_ROOT = (2 << 32) | (4 << 48)
_MESSAGE_ROOT = (1 << 32) | (1 << 48)
_TASK_POINTER = (1 << 32) | (12 << 48)
_MESSAGE_TASK = 6  #: Message's union discriminant of `task`
_ARGUMENT_TAG_SHAPE = (1 << 32) | (2 << 48)  #: an Argument: 1 data word, 2 pointers (the composite list's tag word)
_KINDS = {m.ArgumentKind.INLINE: 0, m.ArgumentKind.OBJECT_ID: 1, m.ArgumentKind.TASK_RESULT: 2}


_BODY_HEAD = struct.Struct("<II7Q")
_TASK_HEAD = struct.Struct("<II16Q")
_POINTER_LIST = 6  #: a list pointer's element size: pointers (List(Data))
_ARGUMENT = struct.Struct("<QQQ")


def _blob_pointer(at: int, target: int, count: int) -> int:
    """A byte list pointer in word `at` to `count` bytes from word `target`."""
    return ((target - at - 1) << 2) | 1 | ((_BYTE_LIST | (count << 3)) << 32)


def body_frame(body: m.TaskBody) -> bytes | None:
    """The encoded TaskBody (None: a body with forwarded logging, written by the generated codec)."""
    if body.log_forwarding is not None:
        return None
    # words after the segment table: 0 the root pointer, 1-2 the data section, 3-6 the pointers, then the blobs
    function_id, serializer_id, args = body.function_id, body.serializer_id, body.args
    size = len(function_id)
    parts = [b"", function_id, _PAD[size & 7]]
    function_pointer = ((7 - 4) << 2) | 1 | ((_BYTE_LIST | (size << 3)) << 32)
    end = 7 + ((size + 7) >> 3)
    serializer_pointer = args_pointer = 0
    if serializer_id:
        size = len(serializer_id)
        serializer_pointer = ((end - 5) << 2) | 1 | ((_BYTE_LIST | (size << 3)) << 32)
        parts += (serializer_id, _PAD[size & 7])
        end += (size + 7) >> 3
    if args:
        count = len(args)
        args_pointer = ((end - 6) << 2) | 1 | ((7 | ((count * 3) << 3)) << 32)
        parts.append(_WORD.pack((count << 2) | _ARGUMENT_TAG_SHAPE))
        structs_at = len(parts)
        parts += [b""] * count
        at = end + 1  #: the argument's data word; its pointers: at + 1 (keyword), at + 2 (data)
        end = at + count * 3
        for index, argument in enumerate(args):
            kind = _KINDS.get(argument.kind)
            if kind is None:
                return None
            keyword_pointer = 0
            if argument.keyword:
                keyword = argument.keyword.encode() + b"\0"
                size = len(keyword)
                keyword_pointer = ((end - at - 2) << 2) | 1 | ((_BYTE_LIST | (size << 3)) << 32)
                parts += (keyword, _PAD[size & 7])
                end += (size + 7) >> 3
            data = argument.data
            size = len(data)
            data_pointer = ((end - at - 3) << 2) | 1 | ((_BYTE_LIST | (size << 3)) << 32)
            parts[structs_at + index] = _ARGUMENT.pack(
                kind | (65536 if argument.copy_on_write else 0), keyword_pointer, data_pointer
            )
            parts += (data, _PAD[size & 7])
            end += (size + 7) >> 3
            at += 3
    flags = (1 if body.profiling else 0) | (2 if body.stream_output else 0)
    parts[0] = _BODY_HEAD.pack(
        0, end, _BODY_ROOT, flags | (body.clear_epoch << 32), 0, function_pointer, serializer_pointer, args_pointer, 0
    )
    return b"".join(parts)


def task_frame(task: m.Task) -> bytes | None:
    """The encoded Message holding the Task (None: one with capabilities, a graph's fields, an actor's start or a
    result's id, written by the generated codec)."""
    if task.capabilities or task.graph_id or task.dependencies or task.inputs or task.actor is not None:
        return None
    if task.result_id:
        return None
    task_id, client_id, body = task.task_id, task.client_id, task.body
    id_size, client_size, body_size = len(task_id), len(client_id), len(body)
    if task.actor_id or task.large_inputs:
        return _task_frame(task, id_size, client_size, body_size)
    # the common task: its words but the segment's size and the body's pointer are those of its function, priority,
    # stream credit and id sizes (the same for a client's tasks of one function), made once for them
    key = (task.function_name, task.priority, task.stream_credit, id_size, client_size)
    known = _HEADS.get(key)
    if known is None:
        known = _head(*key)
    words, name, body_at = known
    end = body_at + ((body_size + 7) >> 3)
    body_pointer = ((body_at - 9) << 2) | 1 | ((_BYTE_LIST | (body_size << 3)) << 32)
    return b"".join(
        (
            _SEGMENT.pack(0, end), words, _WORD.pack(body_pointer), _NO_POINTERS, task_id, _PAD[id_size & 7], client_id,
            _PAD[client_size & 7], name, body, _PAD[body_size & 7],
        )
    )  # fmt: skip


_SEGMENT = struct.Struct("<II")  #: the segment table of a one-segment message: 0 (one segment), its size in words
_COMMON_WORDS = struct.Struct("<8Q")  #: root pointer, Message's data and pointer, Task's data, its first 4 pointers
_NO_POINTERS = bytes(7 * 8)  #: Task's pointers after its body's: none set in the common task
#: the common task's words by (function name, priority, stream credit, task id size, client id size), with its function
#: name's blob (padded) and the word its body starts at (`_head`)
_HEADS: dict[tuple[str, int, int, int, int], tuple[bytes, bytes, int]] = {}
MAX_HEADS = 1024  #: kinds of common task kept (past it the table starts again)


def _head(
    function_name: str, priority: int, stream_credit: int, id_size: int, client_size: int
) -> tuple[bytes, bytes, int]:
    """The words of a common task of this kind before its body's pointer, its name's blob padded to a word, and the
    word its body starts at; kept in `_HEADS`."""
    name = function_name.encode() + b"\0"
    name_size = len(name)
    client_at = 16 + ((id_size + 7) >> 3)
    name_at = client_at + ((client_size + 7) >> 3)
    body_at = name_at + ((name_size + 7) >> 3)
    words = _COMMON_WORDS.pack(
        _MESSAGE_ROOT, _MESSAGE_TASK, _TASK_POINTER, (priority & 0xFFFFFFFF) | (stream_credit << 32),
        ((16 - 5) << 2) | 1 | ((_BYTE_LIST | (id_size << 3)) << 32),
        ((client_at - 6) << 2) | 1 | ((_BYTE_LIST | (client_size << 3)) << 32),
        ((name_at - 7) << 2) | 1 | ((_BYTE_LIST | (name_size << 3)) << 32),
        0,
    )  # fmt: skip
    if len(_HEADS) >= MAX_HEADS:
        _HEADS.clear()
    made = _HEADS[(function_name, priority, stream_credit, id_size, client_size)] = (
        words, name + _PAD[name_size & 7], body_at
    )  # fmt: skip
    return made


def _task_frame(task: m.Task, id_size: int, client_size: int, body_size: int) -> bytes:
    """`task_frame` of a task with an actor's call's id or large inputs, each word written for it."""
    # words after the segment table: 0 the root pointer, 1 Message's data, 2 its pointer, 3 Task's data, 4-15 its
    # pointers (taskId 4, clientId 5, functionName 6, body 8, actorId 12, largeInputs 14), then the blobs in the order
    # they are set
    task_id, client_id, body, actor_id = task.task_id, task.client_id, task.body, task.actor_id
    name = task.function_name.encode() + b"\0"
    name_size = len(name)
    client_at = 16 + ((id_size + 7) >> 3)
    name_at = client_at + ((client_size + 7) >> 3)
    body_at = name_at + ((name_size + 7) >> 3)
    end = body_at + ((body_size + 7) >> 3)
    parts = [
        b"", task_id, _PAD[id_size & 7], client_id, _PAD[client_size & 7], name, _PAD[name_size & 7], body,
        _PAD[body_size & 7],
    ]  # fmt: skip
    actor_pointer = 0
    if actor_id:
        actor_pointer = _blob_pointer(12, end, len(actor_id))
        parts += (actor_id, _PAD[len(actor_id) & 7])
        end += (len(actor_id) + 7) >> 3
    large_pointer = 0
    if task.large_inputs:
        large_pointer, end = _list_of_blobs(14, end, task.large_inputs, parts)
    parts[0] = _TASK_HEAD.pack(
        0, end, _MESSAGE_ROOT, _MESSAGE_TASK, _TASK_POINTER, (task.priority & 0xFFFFFFFF) | (task.stream_credit << 32),
        ((16 - 5) << 2) | 1 | ((_BYTE_LIST | (id_size << 3)) << 32),
        ((client_at - 6) << 2) | 1 | ((_BYTE_LIST | (client_size << 3)) << 32),
        ((name_at - 7) << 2) | 1 | ((_BYTE_LIST | (name_size << 3)) << 32),
        0,
        ((body_at - 9) << 2) | 1 | ((_BYTE_LIST | (body_size << 3)) << 32),
        0, 0, 0, actor_pointer, 0, large_pointer, 0,
    )  # fmt: skip
    return b"".join(parts)


def _list_of_blobs(at: int, end: int, blobs: tuple[bytes, ...], parts: list[bytes]) -> tuple[int, int]:
    """A List(Data) of `blobs` laid out from word `end` (its pointers, then each blob) for the pointer in word `at`:
    that pointer, and the word after the list's last blob."""
    count = len(blobs)
    pointer = ((end - at - 1) << 2) | 1 | ((_POINTER_LIST | (count << 3)) << 32)
    first, end = end, end + count
    words = []
    for index, blob in enumerate(blobs):
        words.append(_WORD.pack(_blob_pointer(first + index, end, len(blob))))
        parts += (blob, _PAD[len(blob) & 7])
        end += (len(blob) + 7) >> 3
    parts[len(parts) - 2 * count : len(parts) - 2 * count] = words
    return pointer, end


#: the words a common task's frame starts with after its segment table: the root pointer, Message's union discriminant
#: (its task), the Task's struct pointer
COMMON_TASK_START = struct.pack("<3Q", _MESSAGE_ROOT, _MESSAGE_TASK, _TASK_POINTER)
_BLOBS_AT = 4 + (_TASK_POINTER >> 48)  #: the word a common task's first blob starts at (after Task's last pointer)
_FIRST_BLOB = 8 + 8 * _BLOBS_AT  #: its byte
#: the halves of the segment table's words and of the body's pointer (all below 2**32: no integer of several digits)
_SIZES = struct.Struct("<II64xII")
_NEW_TASK = constructor(m.Task)
_SET_WIRE = vars(m.Task)["wire"].__set__
_NO_ID = TaskID(b"")
_NO_GRAPH = GraphID(b"")
#: what a common task's words 3-7 (its data word; its id's, client's and name's pointers; no capabilities) say: where
#: its blobs are, its priority and stream credit; None where they do not lay a common task out (`_layout`)
_LAYOUTS: dict[bytes, tuple[int, int, int, int, int, int, int, int, int] | None] = {}
#: function names by their bytes, as read lately
_NAMES: dict[bytes, str] = {}


def read_task_frame(frame: bytes) -> m.Task | None:
    """The Task of a frame of the common shape (`task_frame`'s layout: one segment, every pointer and the segment's size
    the ones its blobs' sizes give, no other field set), which it keeps (`wire`: sent on unchanged); None for any other
    frame (the generated codec reads it)."""
    if (
        len(frame) < _FIRST_BLOB
        or not frame.startswith(COMMON_TASK_START, 8)
        or not frame.startswith(_NO_POINTERS, _FIRST_BLOB - len(_NO_POINTERS))
    ):
        return None
    words = frame[32:72]
    layout = _LAYOUTS.get(words, _UNKNOWN)
    if layout is _UNKNOWN:
        layout = _layout(words)
    if layout is None:
        return None
    client_start, client_end, name_start, name_end, body_start, body_pointer, priority, stream_credit, id_size = layout
    count, end, pointer, size_word = _SIZES.unpack_from(frame)
    body_size = size_word >> 3
    # a frame that passes holds each blob where the layout says, inside the frame (whose size is the segment's)
    if (
        count
        or pointer != body_pointer
        or size_word & 7 != _BYTE_LIST
        or 8 + 8 * end != len(frame)
        or len(frame) != body_start + ((body_size + 7) & ~7)
        or frame[name_end] != 0  # a Text ends with its NUL
    ):
        return None
    name_bytes = frame[name_start:name_end]
    function_name = _NAMES.get(name_bytes)
    if function_name is None:
        try:
            function_name = sys.intern(name_bytes.decode())
        except UnicodeDecodeError:
            return None
        if len(_NAMES) >= MAX_HEADS:
            _NAMES.clear()
        _NAMES[name_bytes] = function_name
    task = _NEW_TASK(
        TaskID(frame[_FIRST_BLOB : _FIRST_BLOB + id_size]),
        shared(ClientID(frame[client_start:client_end])),
        frame[body_start : body_start + body_size],
        function_name,
        priority,
        (),
        _NO_GRAPH,
        (),
        (),
        stream_credit,
        _NO_ID,
        None,
        (),
    )
    _SET_WIRE(task, frame)
    return task


_UNKNOWN = (0, 0, 0, 0, 0, 0, 0, 0, 0)


def _layout(words: bytes) -> tuple[int, int, int, int, int, int, int, int, int] | None:
    """Where a common task's blobs are, read from its words 3-7, and kept in `_LAYOUTS`: (the client id's first byte
    and its end, the name's first byte, its NUL's, the body's first byte, the low half of the body's pointer, priority,
    stream credit, the id's size); None when those words are not a common task's."""
    data, id_pointer, client_pointer, name_pointer, capabilities = struct.unpack("<5Q", words)
    id_size, client_size, name_size = id_pointer >> 35, client_pointer >> 35, name_pointer >> 35
    client_at = _BLOBS_AT + ((id_size + 7) >> 3)
    name_at = client_at + ((client_size + 7) >> 3)
    body_at = name_at + ((name_size + 7) >> 3)
    layout = None
    if (
        not capabilities
        and name_size
        and id_pointer == ((_BLOBS_AT - 5) << 2) | 1 | ((_BYTE_LIST | (id_size << 3)) << 32)
        and client_pointer == ((client_at - 6) << 2) | 1 | ((_BYTE_LIST | (client_size << 3)) << 32)
        and name_pointer == ((name_at - 7) << 2) | 1 | ((_BYTE_LIST | (name_size << 3)) << 32)
    ):
        priority = data & 0xFFFFFFFF
        if priority & 0x80000000:  # an Int32
            priority -= 1 << 32
        client_start, name_start = 8 + 8 * client_at, 8 + 8 * name_at
        layout = (
            client_start, client_start + client_size, name_start, name_start + name_size - 1, 8 + 8 * body_at,
            ((body_at - 9) << 2) | 1, priority, data >> 32, id_size,
        )  # fmt: skip
    if len(_LAYOUTS) >= MAX_HEADS:
        _LAYOUTS.clear()
    _LAYOUTS[words] = layout
    return layout
