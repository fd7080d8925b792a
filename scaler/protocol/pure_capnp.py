"""Cap'n Proto's unpacked encoding in pure Python, for the protocol's schemas: the part of pycapnp's API that the
codec uses (`codec.py`, `codec_structs.py`, `codec_fields.py`), so that the same generated writers and readers run
where pycapnp cannot be installed (Pyodide in a browser; `SCALER_PURE_CAPNP=1` anywhere).

The layout (section sizes, offsets, discriminants) is `capnp_layout.py`, generated from the compiled schemas. A
builder allocates every object after the last, in one segment, in the order the writer sets them: what pycapnp does
for a message under its first segment's 8 KiB, so such a message is the same bytes whichever wrote it
(tests/unit/test_pure_capnp.py compares them). A reader follows any valid message (several segments, far pointers), and
raises ValueError for one that is not: a pointer out of its segment, a list of the wrong element size, more words
visited than the traversal limit.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from scaler.protocol import capnp_layout

_WORD = struct.Struct("<Q")
_HEAD = struct.Struct("<I")
_SCALARS = {
    "int8": struct.Struct("<b"), "int16": struct.Struct("<h"), "int32": struct.Struct("<i"),
    "int64": struct.Struct("<q"), "uint8": struct.Struct("<B"), "uint16": struct.Struct("<H"),
    "uint32": struct.Struct("<I"), "uint64": struct.Struct("<Q"), "float32": struct.Struct("<f"),
    "float64": struct.Struct("<d"), "enum": struct.Struct("<H"),
}  # fmt: skip
#: a list pointer's element size code for each element type (Cap'n Proto's encoding spec)
_ELEMENT_SIZES = {"void": 0, "bool": 1, "int8": 2, "uint8": 2, "int16": 3, "uint16": 3, "int32": 4, "uint32": 4}
_ELEMENT_SIZES |= {"float32": 4, "int64": 5, "uint64": 5, "float64": 5, "text": 6, "data": 6}
_COMPOSITE = 7
_BYTE_ELEMENTS = 2


class Enumerant(NamedTuple):
    """An enum field as read: `raw` is its ordinal (what pycapnp's enum reading gives as `.raw`)."""

    raw: int


class FieldLayout:
    """One field of a struct's layout: what `schemas.field_of` gives, and `_get_by_field` takes."""

    __slots__ = ("discriminant", "element", "kind", "name", "offset", "schema")

    def __init__(self, name: str, discriminant: int, kind: str, offset: int, element: str) -> None:
        self.name = name
        self.discriminant = discriminant
        self.kind = kind
        self.offset = offset
        self.element = element
        self.schema: StructSchema | None = None  #: a group's own layout, or a struct field's struct


class StructSchema:
    """One struct (or group) of a schema: `new_message()`, `read_multiple_bytes(...)`, `from_bytes(...)`, as pycapnp's
    struct module has them, and `schema.fields` for `field_of`."""

    def __init__(self, name: str, layout: capnp_layout.Struct, enums: dict[str, tuple[str, ...]]) -> None:
        self.name = name
        self.data_words, self.pointer_count, self.discriminant_offset, rows = layout
        self.fields = {row[0]: FieldLayout(*row) for row in rows}
        #: the union's members by discriminant
        self.members = {f.discriminant: f.name for f in self.fields.values() if f.discriminant >= 0}
        self.enums = {f.name: enums[f.element] for f in self.fields.values() if f.kind == "enum"}

    @property
    def schema(self) -> StructSchema:
        return self

    def new_message(self) -> StructBuilder:
        arena = bytearray(8 * (1 + self.data_words + self.pointer_count))
        arena[0:8] = _WORD.pack(_struct_pointer(0, 1, self))
        return StructBuilder(arena, 8, 1 + self.data_words, self)

    def read_multiple_bytes(self, data: bytes, traversal_limit_in_words: int = 8 * 1024 * 1024) -> Iterator[Any]:
        """The root of each message in `data`, in order (messages back to back)."""
        at = 0
        while at < len(data):
            message, at = _Message.parse(data, at, traversal_limit_in_words)
            yield message.root(self)

    def from_bytes(self, data: bytes, traversal_limit_in_words: int = 8 * 1024 * 1024) -> _Reading:
        return _Reading(_Message.parse(data, 0, traversal_limit_in_words)[0].root(self))


class _Reading:
    """`with schema.from_bytes(data) as reader:` (pycapnp's form)."""

    def __init__(self, reader: StructReader) -> None:
        self._reader = reader

    def __enter__(self) -> StructReader:
        return self._reader

    def __exit__(self, *_: object) -> None:
        return None


class Schema:
    """One schema file: its structs by name (`MESSAGE.Task`), as pycapnp's loaded module has them."""

    def __init__(self, structs: dict[str, capnp_layout.Struct], enums: dict[str, tuple[str, ...]]) -> None:
        self._structs = {name: StructSchema(name, layout, enums) for name, layout in structs.items()}
        for schema in self._structs.values():
            for f in schema.fields.values():
                if f.kind in ("group", "struct"):
                    f.schema = self._structs[f.element]
                elif f.kind == "list" and f.element.startswith("struct:"):
                    f.schema = self._structs[f.element.removeprefix("struct:")]

    def __getattr__(self, name: str) -> StructSchema:
        try:
            return self._structs[name]
        except KeyError:
            raise AttributeError(name) from None


def load(alias: str) -> Schema:
    """The schema whose values module the codec names `alias` (m, sm)."""
    return Schema(getattr(capnp_layout, f"{alias.upper()}_STRUCTS"), getattr(capnp_layout, f"{alias.upper()}_ENUMS"))


# ---------------------------------------------------------------- reading


class _Message:
    """A message's segments within its frame, and the words a reader may still visit."""

    __slots__ = ("budget", "data", "segments")

    def __init__(self, data: bytes, segments: list[tuple[int, int]], budget: int) -> None:
        self.data = data
        self.segments = segments  #: each segment's first byte in `data` and its size in words
        self.budget = budget

    @classmethod
    def parse(cls, data: bytes, at: int, limit: int) -> tuple[_Message, int]:
        """The message starting at byte `at`, and where the next one starts."""
        if len(data) - at < 8:
            raise ValueError("a message cut short: no segment table")
        count = _HEAD.unpack_from(data, at)[0] + 1
        table = 4 * (1 + count)
        table += table & 4
        if count > 512 or len(data) - at < table:
            raise ValueError(f"a segment table of {count} segments cut short")
        start, segments = at + table, []
        for index in range(count):
            size = _HEAD.unpack_from(data, at + 4 + 4 * index)[0]
            segments.append((start, size))
            start += 8 * size
        if start > len(data):
            raise ValueError(f"segments of {start - at} bytes in {len(data) - at}")
        return cls(data, segments, limit), start

    def root(self, schema: StructSchema) -> StructReader:
        return _follow_struct(self, 0, 0, schema)

    def visit(self, words: int) -> None:
        self.budget -= words
        if self.budget < 0:
            raise ValueError("the message exceeds its traversal limit")

    def word(self, segment: int, index: int) -> int:
        start, size = self.segments[segment]
        if not 0 <= index < size:
            raise ValueError(f"a pointer out of its segment (word {index} of {size})")
        return int(_WORD.unpack_from(self.data, start + 8 * index)[0])

    def check(self, segment: int, index: int, words: int) -> int:
        """The byte where `words` words from word `index` of `segment` start (checked to lie in it)."""
        start, size = self.segments[segment]
        if index < 0 or index + words > size:
            raise ValueError(f"an object out of its segment (words {index}-{index + words} of {size})")
        return start + 8 * index


def _signed_offset(pointer: int) -> int:
    offset = (pointer >> 2) & 0x3FFFFFFF
    return offset - (1 << 30) if offset & (1 << 29) else offset


def _resolve(message: _Message, segment: int, at: int) -> tuple[int, int, int]:
    """The pointer in word `at` of `segment`, far pointers followed: (segment, target word, the pointer's word with
    its kind and sizes). Null: a pointer of 0."""
    pointer = message.word(segment, at)
    if pointer & 3 != 2:
        return segment, at + 1 + _signed_offset(pointer), pointer
    pad_segment, pad = pointer >> 32, (pointer >> 3) & 0x1FFFFFFF
    if pad_segment >= len(message.segments):
        raise ValueError(f"a far pointer to segment {pad_segment} of {len(message.segments)}")
    landing = message.word(pad_segment, pad)
    if not pointer & 4:  # one landing pad: an ordinary pointer, its offset from the pad
        if landing & 3 == 2:
            raise ValueError("a far pointer landing on another far pointer")
        return pad_segment, pad + 1 + _signed_offset(landing), landing
    target_segment = landing >> 32
    if landing & 7 != 2 or target_segment >= len(message.segments):  # two: a far pointer to the content, then its tag
        raise ValueError("a double-far landing pad that is not one")
    return target_segment, (landing >> 3) & 0x1FFFFFFF, message.word(pad_segment, pad + 1)


def _follow_struct(message: _Message, segment: int, at: int, schema: StructSchema) -> StructReader:
    target_segment, target, pointer = _resolve(message, segment, at)
    if pointer == 0:
        return StructReader(message, 0, 0, 0, 0, 0, schema)
    if pointer & 3 != 0:
        raise ValueError(f"{schema.name}: a pointer that is not a struct's")
    data_words, pointers = (pointer >> 32) & 0xFFFF, pointer >> 48
    byte = message.check(target_segment, target, data_words + pointers)
    message.visit(max(1, data_words + pointers))
    return StructReader(message, target_segment, byte, data_words, target + data_words, pointers, schema)


class StructReader:
    """A struct (or group) of a message being read: `_get_by_field`, `_has_by_field`, `_which_str`, `which`, and its
    fields as attributes."""

    __slots__ = ("_data", "_data_bytes", "_message", "_pointer_count", "_pointers", "_schema", "_segment")

    def __init__(
        self, message: _Message, segment: int, data: int, data_words: int, pointers: int, pointer_count: int,
        schema: StructSchema,
    ) -> None:  # fmt: skip
        self._message = message
        self._segment = segment
        self._data = data  #: its data section's first byte in the message's frame
        self._data_bytes = 8 * data_words
        self._pointers = pointers  #: its pointer section's first word in its segment
        self._pointer_count = pointer_count
        self._schema = schema

    def _get_by_field(self, f: FieldLayout) -> Any:
        return _READERS[f.kind](self, f)

    def _has_by_field(self, f: FieldLayout) -> bool:
        return f.offset < self._pointer_count and self._message.word(self._segment, self._pointers + f.offset) != 0

    def _which_str(self) -> str:
        offset = self._schema.discriminant_offset
        if offset < 0:
            raise ValueError(f"{self._schema.name} has no union")
        raw = self._scalar(_SCALARS["uint16"], 2 * offset, 2)
        name = self._schema.members.get(raw)
        if name is None:
            raise ValueError(f"{self._schema.name}: unknown union member {raw}")
        return name

    def which(self) -> str:
        return self._which_str()

    def __getattr__(self, name: str) -> Any:
        f = self._schema.fields.get(name)
        if f is None:
            raise AttributeError(f"{self._schema.name} has no field {name!r}")
        return self._get_by_field(f)

    def _scalar(self, packing: struct.Struct, byte: int, size: int) -> Any:
        if byte + size > self._data_bytes:
            return packing.unpack(bytes(size))[0]  # a struct written by an older schema: the field's default
        return packing.unpack_from(self._message.data, self._data + byte)[0]

    def _pointer(self, f: FieldLayout) -> tuple[int, int, int] | None:
        """The field's pointer resolved (None: null or beyond the struct's pointers)."""
        if f.offset >= self._pointer_count:
            return None
        resolved = _resolve(self._message, self._segment, self._pointers + f.offset)
        return None if resolved[2] == 0 else resolved


def _read_bool(reader: StructReader, f: FieldLayout) -> bool:
    byte = f.offset >> 3
    if byte >= reader._data_bytes:
        return False
    return bool(reader._message.data[reader._data + byte] >> (f.offset & 7) & 1)


def _read_scalar(reader: StructReader, f: FieldLayout) -> Any:
    packing = _SCALARS[f.kind]
    return reader._scalar(packing, f.offset * packing.size, packing.size)


def _read_enum(reader: StructReader, f: FieldLayout) -> Enumerant:
    return Enumerant(reader._scalar(_SCALARS["enum"], 2 * f.offset, 2))


def _read_blob(reader: StructReader, f: FieldLayout) -> bytes:
    resolved = reader._pointer(f)
    if resolved is None:
        return b""
    return _blob(reader._message, *resolved)


def _blob(message: _Message, segment: int, target: int, pointer: int) -> bytes:
    if pointer & 3 != 1 or (pointer >> 32) & 7 != _BYTE_ELEMENTS:
        raise ValueError("a Text or Data pointer that is not a list of bytes")
    count = pointer >> 35
    byte = message.check(segment, target, (count + 7) >> 3)
    message.visit((count + 7) >> 3)
    return message.data[byte : byte + count]


def _read_text(reader: StructReader, f: FieldLayout) -> str:
    data = _read_blob(reader, f)
    return data[:-1].decode() if data else ""


def _read_struct(reader: StructReader, f: FieldLayout) -> StructReader:
    assert f.schema is not None
    if f.offset >= reader._pointer_count:
        return StructReader(reader._message, 0, 0, 0, 0, 0, f.schema)
    return _follow_struct(reader._message, reader._segment, reader._pointers + f.offset, f.schema)


def _read_group(reader: StructReader, f: FieldLayout) -> StructReader:
    """A group: another view of its struct's sections."""
    assert f.schema is not None
    return StructReader(
        reader._message, reader._segment, reader._data, reader._data_bytes >> 3, reader._pointers,
        reader._pointer_count, f.schema,
    )  # fmt: skip


def _read_list(reader: StructReader, f: FieldLayout) -> ListReader:
    resolved = reader._pointer(f)
    if resolved is None:
        return ListReader(reader._message, 0, 0, 0, 0, 0, f)
    segment, target, pointer = resolved
    if pointer & 3 != 1:
        raise ValueError(f"{reader._schema.name}.{f.name}: a pointer that is not a list's")
    size_code, count = (pointer >> 32) & 7, pointer >> 35
    if f.schema is not None:  # a list of structs: a tag word, then each element's sections
        if size_code != _COMPOSITE:
            raise ValueError(f"{reader._schema.name}.{f.name}: a list of structs that is not composite")
        tag = reader._message.word(segment, target)
        elements = _signed_offset(tag)
        step = ((tag >> 32) & 0xFFFF) + (tag >> 48)
        reader._message.check(segment, target + 1, count)
        if elements < 0 or elements * step > count:
            raise ValueError(f"{reader._schema.name}.{f.name}: a list tag claiming more than its words")
        reader._message.visit(max(count, elements))
        return ListReader(reader._message, segment, target + 1, elements, step, tag, f)
    if size_code != _ELEMENT_SIZES[f.element]:
        raise ValueError(f"{reader._schema.name}.{f.name}: a list of the wrong element size")
    words = count if size_code == 6 else (count * (0, 1, 8, 16, 32, 64)[size_code] + 63) >> 6
    reader._message.check(segment, target, words)
    reader._message.visit(max(1, words))
    return ListReader(reader._message, segment, target, count, 0, 0, f)


class ListReader(Sequence[Any]):
    """A list field being read: its elements (bytes, str, int, float or StructReader) by index or in order."""

    def __init__(
        self, message: _Message, segment: int, at: int, count: int, step: int, tag: int, f: FieldLayout
    ) -> None:
        self._message = message
        self._segment = segment
        self._at = at  #: its first element's word in its segment
        self._count = count
        self._step = step  #: a struct element's words
        self._tag = tag
        self._field = f

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if not -self._count <= index < self._count:
            raise IndexError(index)
        index %= self._count
        f = self._field
        if f.schema is not None:
            at = self._at + index * self._step
            data_words = (self._tag >> 32) & 0xFFFF
            byte = self._message.check(self._segment, at, self._step)
            pointers = self._tag >> 48
            return StructReader(self._message, self._segment, byte, data_words, at + data_words, pointers, f.schema)
        if f.element in ("data", "text"):
            resolved = _resolve(self._message, self._segment, self._at + index)
            blob = b"" if resolved[2] == 0 else _blob(self._message, *resolved)
            return (blob[:-1].decode() if blob else "") if f.element == "text" else blob
        first = self._message.check(self._segment, self._at, 0)
        if f.element == "bool":
            return bool(self._message.data[first + (index >> 3)] >> (index & 7) & 1)
        packing = _SCALARS[f.element]
        return packing.unpack_from(self._message.data, first + index * packing.size)[0]

    def __iter__(self) -> Iterator[Any]:
        for index in range(self._count):
            yield self[index]


_READERS: dict[str, Any] = {
    "void": lambda reader, f: None, "bool": _read_bool, "text": _read_text, "data": _read_blob,
    "struct": _read_struct, "group": _read_group, "list": _read_list, "enum": _read_enum,
    **dict.fromkeys(("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"), _read_scalar),
    "float32": _read_scalar, "float64": _read_scalar,
}  # fmt: skip


# ---------------------------------------------------------------- building


def _struct_pointer(at: int, target: int, schema: StructSchema) -> int:
    return ((target - at - 1) << 2) | (schema.data_words << 32) | (schema.pointer_count << 48)


def _list_pointer(at: int, target: int, size_code: int, count: int) -> int:
    return ((target - at - 1) << 2) | 1 | (size_code << 32) | (count << 35)


def _allocate(arena: bytearray, words: int) -> int:
    """Room for `words` words after the last object: its first word."""
    at = len(arena) >> 3
    arena.extend(bytes(8 * words))
    return at


def _write_blob(arena: bytearray, at: int, data: bytes) -> None:
    """`data` after the last object, and a byte list pointer to it in word `at`."""
    target = _allocate(arena, (len(data) + 7) >> 3)
    arena[8 * target : 8 * target + len(data)] = data
    _WORD.pack_into(arena, 8 * at, _list_pointer(at, target, _BYTE_ELEMENTS, len(data)))


class StructBuilder:
    """A struct (or group) being written: fields set as attributes (`b.taskId = ...`), structs and lists made with
    `init`, `to_bytes()` on the message's root."""

    __slots__ = ("_arena", "_data", "_pointers", "_schema")
    _arena: bytearray
    _data: int
    _pointers: int
    _schema: StructSchema

    def __init__(self, arena: bytearray, data: int, pointers: int, schema: StructSchema) -> None:
        object.__setattr__(self, "_arena", arena)
        object.__setattr__(self, "_data", data)  #: its data section's first byte
        object.__setattr__(self, "_pointers", pointers)  #: its pointer section's first word
        object.__setattr__(self, "_schema", schema)

    def to_bytes(self) -> bytes:
        arena = self._arena
        return _HEAD.pack(0) + _HEAD.pack(len(arena) >> 3) + bytes(arena)

    def _field(self, name: str) -> FieldLayout:
        f = self._schema.fields.get(name)
        if f is None:
            raise AttributeError(f"{self._schema.name} has no field {name!r}")
        if f.discriminant >= 0:
            _SCALARS["uint16"].pack_into(self._arena, self._data + 2 * self._schema.discriminant_offset, f.discriminant)
        return f

    def __getattr__(self, name: str) -> StructBuilder:
        """A group, or a struct field's struct (made when it is not yet: pycapnp's builders do the same)."""
        f = self._schema.fields.get(name)
        if f is None or f.schema is None or f.kind not in ("group", "struct"):
            raise AttributeError(f"{self._schema.name} has no group or struct field {name!r}")
        if f.kind == "group":
            return StructBuilder(self._arena, self._data, self._pointers, f.schema)
        at = self._pointers + f.offset
        pointer = _WORD.unpack_from(self._arena, 8 * at)[0]
        if pointer == 0:
            return self.init(name)  # type: ignore[no-any-return]
        target = at + 1 + _signed_offset(pointer)
        return StructBuilder(self._arena, 8 * target, target + f.schema.data_words, f.schema)

    def __setattr__(self, name: str, value: Any) -> None:
        f = self._field(name)
        kind, arena = f.kind, self._arena
        if kind == "void":
            return
        if kind == "bool":
            byte = self._data + (f.offset >> 3)
            arena[byte] = arena[byte] | (1 << (f.offset & 7)) if value else arena[byte] & ~(1 << (f.offset & 7))
        elif kind == "enum":
            ordinal = self._schema.enums[name].index(value) if isinstance(value, str) else int(value)
            _SCALARS["enum"].pack_into(arena, self._data + 2 * f.offset, ordinal)
        elif kind in _SCALARS:
            packing = _SCALARS[kind]
            packing.pack_into(arena, self._data + f.offset * packing.size, value)
        elif kind in ("text", "data"):
            _write_blob(arena, self._pointers + f.offset, value.encode() + b"\0" if kind == "text" else bytes(value))
        elif kind == "list":
            self._set_list(f, value)
        else:
            raise TypeError(f"{self._schema.name}.{name}: set a {kind} field with init()")

    def _set_list(self, f: FieldLayout, values: Sequence[Any]) -> None:
        at, arena, count = self._pointers + f.offset, self._arena, len(values)
        if f.element in ("text", "data"):
            target = _allocate(arena, count)
            _WORD.pack_into(arena, 8 * at, _list_pointer(at, target, 6, count))
            for index, value in enumerate(values):
                _write_blob(arena, target + index, value.encode() + b"\0" if f.element == "text" else bytes(value))
            return
        packing = _SCALARS.get(f.element)
        if packing is None:
            raise TypeError(f"{self._schema.name}.{f.name}: set a list of {f.element} with init()")
        target = _allocate(arena, (count * packing.size + 7) >> 3)
        _WORD.pack_into(arena, 8 * at, _list_pointer(at, target, _ELEMENT_SIZES[f.element], count))
        for index, value in enumerate(values):
            packing.pack_into(arena, 8 * target + index * packing.size, value)

    def init(self, name: str, size: int | None = None) -> Any:
        """A struct field's (or union member's) struct, or a list of `size` structs, made empty."""
        f = self._field(name)
        schema, at, arena = f.schema, self._pointers + f.offset, self._arena
        if schema is None:
            raise TypeError(f"{self._schema.name}.{name}: init() makes a struct or a list of structs")
        words = schema.data_words + schema.pointer_count
        if f.kind == "struct":
            target = _allocate(arena, words)
            _WORD.pack_into(arena, 8 * at, _struct_pointer(at, target, schema))
            return StructBuilder(arena, 8 * target, target + schema.data_words, schema)
        count = size or 0
        target = _allocate(arena, 1 + count * words)
        _WORD.pack_into(arena, 8 * at, _list_pointer(at, target, _COMPOSITE, count * words))
        _WORD.pack_into(arena, 8 * target, (count << 2) | (schema.data_words << 32) | (schema.pointer_count << 48))
        first = target + 1
        return [
            StructBuilder(arena, 8 * (first + i * words), first + i * words + schema.data_words, schema)
            for i in range(count)
        ]
