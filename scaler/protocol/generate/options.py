"""The words of the mapping table (`mapping.py`): how a struct, a field or a union of the schema differs from its
mechanical Python value. Every option is optional; an absent entry means "mechanical" (docs/protocol.md,
"Adding a message or a field")."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Field:
    """One schema field whose Python attribute is not the mechanical one."""

    attr: str = ""  #: the attribute's name (mechanical: the field's name in snake_case)
    type: str = ""  #: its annotation (mechanical: from the schema type; ids get their NewType from ID_TYPES)
    default: str = ""  #: its default, a Python expression (mechanical: the zero of its type)
    #: the codec writes nothing for an empty or default value (a reader sees the same value): smaller frames
    omit_empty: bool = False
    optional: bool = False  #: a struct field: None when absent from the frame (mechanical: its default value)
    present_if: str = ""  #: a struct or group field: None unless this Bool field of the struct is set
    encode: str = ""  #: a function of codec_fields applied to the value before it is written
    decode: str = ""  #: a function of codec_fields applied to the value read


@dataclass(frozen=True)
class Extra:
    """A Python attribute that is not on the wire, after the schema's fields (the codec leaves it at its default):
    `declaration` is `name: type = default`."""

    declaration: str
    doc: str


@dataclass(frozen=True)
class Kind:
    """A union whose members are all Data or Void: two attributes, `kind` (an enum of the members, named
    `enum`) and `data` (the member's bytes; empty for a Void member)."""

    enum: str
    kind: str = "kind"
    data: str = "data"


@dataclass(frozen=True)
class Member:
    """What one member of a OneOf union holds in Python: a struct member holds its class unless said otherwise.
    `wrapper`: a class of that name with one attribute (`attr`, annotated `type`) for the member's value, or none
    for a Void member; `bare`: the value itself (None for a Void member)."""

    wrapper: str = ""
    attr: str = ""
    type: str = ""
    bare: bool = False


@dataclass(frozen=True)
class OneOf:
    """A union held in one attribute (`attr`), whose value tells the member: `alias` names the type of the
    possible values. With `enum`, a named union also gets an enum of its members and a property of the union's
    name telling which member a value holds."""

    attr: str
    alias: str
    members: dict[str, Member] = field(default_factory=dict)
    enum: str = ""


@dataclass(frozen=True)
class Members:
    """A union of Void and struct members: one attribute per struct member, None unless it is the member set
    (a Void member: none of them is set)."""


UnionOption = Kind | OneOf | Members


@dataclass(frozen=True)
class Struct:
    """One struct (or group) whose Python class is not the mechanical one."""

    name: str = ""  #: the class name (mechanical: the struct's)
    #: the fields (and unions) a caller must give, space-separated; they come first, in the schema's order
    required: str = ""
    fields: dict[str, Field | UnionOption] = field(default_factory=dict)  #: by schema name; "union": the anonymous one
    extra: tuple[Extra, ...] = ()
    base: str = ""  #: a class of message_extras the class derives from (properties computed from its fields)
    #: fields the codec writes after the others: the order of the hand-written codec, kept so the bytes stay the same
    write_last: str = ""


@dataclass(frozen=True)
class Converter:
    """A schema type held in Python as another type: `encode(builder, field name, value)` writes it and
    `decode(reader of the field)` reads it (functions of codec_fields)."""

    type: str
    default: str
    encode: str
    decode: str
