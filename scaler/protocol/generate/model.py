"""A schema and the mapping table as Python declarations: the constants, enums, classes and aliases of one values
module, each class with the statements of its writer and reader (emit.py prints them).

In the codec's statements `b` is the builder of the struct, `v` the value written and `r` the reader."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from scaler.protocol.generate.mapping import CONVERTERS, ENVELOPE, ID_TYPES, STRUCTS
from scaler.protocol.generate.options import Field, Kind, Member, Members, OneOf, Struct, UnionOption

_SCALARS = {
    "bool": ("bool", "False"),
    **{name: ("int", "0") for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")},
    "float32": ("float", "0.0"),
    "float64": ("float", "0.0"),
    "text": ("str", '""'),
    "data": ("bytes", 'b""'),
}
_NOT_IN_A_UNION = 0xFFFF  # a field's discriminant value when it is not a member of a union


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def upper(name: str) -> str:
    return snake(name).upper()


@dataclass
class Attribute:
    name: str
    annotation: str
    default: str | None  #: None: a caller must give it
    doc: str = ""


@dataclass
class Slot:
    """What one schema field, group or union is in Python (its attributes) and in the codec (statements)."""

    code_order: int  #: where the schema declares it: the attributes' order
    ordinal: int  #: its lowest ordinal: the order the codec writes it in
    name: str  #: the schema's name; "union" for the anonymous union
    attributes: list[Attribute]
    encode: list[str]
    decode_setup: list[str]  #: statements before the value is made
    decode_args: list[str]  #: one expression per attribute


@dataclass
class PyEnum:
    name: str
    doc: str
    members: list[tuple[str, str, str]]  #: name, value, doc


@dataclass
class PyClass:
    name: str
    doc: str
    module: str  #: how the codec names the values module: m or sm
    attributes: list[Attribute] = field(default_factory=list)
    extras: list[Attribute] = field(default_factory=list)
    base: str = ""
    properties: list[tuple[str, str, str, str]] = field(default_factory=list)  #: name, type, doc, expression
    slots: list[Slot] | None = None  #: None: no codec of its own (a union member's wrapper)
    write_last: tuple[str, ...] = ()

    @property
    def reference(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def function(self) -> str:
        return snake(self.name)

    @property
    def constructor(self) -> str:
        """The codec's constant that makes its values (`codec_fields.constructor`)."""
        return f"_NEW_{self.module.upper()}_{upper(self.name)}"


@dataclass
class Module:
    """One schema's Python declarations."""

    module: str  #: how the codec names the values module
    name: str  #: the values module (in scaler.protocol)
    constants: list[tuple[str, str, str]] = field(default_factory=list)  #: name, value, doc
    enums: list[PyEnum] = field(default_factory=list)
    classes: list[PyClass] = field(default_factory=list)
    aliases: list[tuple[str, list[str]]] = field(default_factory=list)
    tables: list[tuple[str, str, list[tuple[str, str]]]] = field(default_factory=list)  #: name, enum, (class, member)
    envelope: list[tuple[str, str]] = field(default_factory=list)  #: (member, class) by discriminant
    codec_constants: dict[str, str] = field(default_factory=dict)  #: name -> expression, for the codec
    imports: dict[str, set[str]] = field(default_factory=dict)  #: another schema's values module -> its classes used


@dataclass
class _Union:
    """A union being mapped: where it is and how the codec reaches it."""

    py: PyClass
    path: str  #: of its members' comments
    name: str  #: its schema name; "union" for the anonymous one
    members: list[Any]  #: by discriminant
    code_order: int
    ordinal: int
    base: str  #: its builder
    reader: str

    def slot(self, attributes: list[Attribute], encode: list[str], setup: list[str], args: list[str]) -> Slot:
        return Slot(self.code_order, self.ordinal, self.name, attributes, encode, setup, args)

    def branches(self, tests: list[str], bodies: list[list[str]], otherwise: str) -> list[str]:
        """An if/elif chain; the last branch raises `otherwise`."""
        lines = []
        for index, (test, body) in enumerate(zip(tests, bodies, strict=True)):
            lines += [f"{'if' if index == 0 else 'elif'} {test}:", *(f"    {line}" for line in body)]
        return [*lines, "else:", f"    raise {otherwise}"]

    def which(self) -> list[str]:
        return [f"which = {self.reader}._which_str()"]  # `_which()` builds an enum object: several times the cost


def struct_names(schema: Any) -> dict[int, str]:
    """The structs a loaded schema declares, by type id."""
    nodes = [(node.id, node.name, getattr(schema, node.name)) for node in schema.schema.node.nestedNodes]
    return {type_id: name for type_id, name, value in nodes if getattr(value, "schema", None) is not None
            and value.schema.node.which() == "struct"}  # fmt: skip


class SchemaModel:
    """Builds the Module of one loaded schema."""

    def __init__(
        self,
        schema: Any,
        comments: dict[str, str],
        module: str,
        name: str,
        foreign: dict[int, tuple[str, str, str]] | None = None,
    ):
        """`foreign`: the structs of the other schemas, which this one may import (`using X = import "..."`): by type
        id, the codec's name of their values module, that module and the struct's name."""
        self._schema = schema
        self._comments = comments
        self.out = Module(module, name)
        self._names = {node.id: node.name for node in schema.schema.node.nestedNodes}
        self._foreign = foreign or {}
        self._enums: dict[int, PyEnum] = {}
        self._kind_enums: dict[str, list[tuple[str, str]]] = {}
        self._omitted: list[tuple[Slot, str, str]] = []  #: struct fields omitted when empty: slot, class, value
        self.structs: set[str] = set()  #: the names of its structs and enums

    def build(self) -> Module:
        nodes = [(node.name, getattr(self._schema, node.name)) for node in self._schema.schema.node.nestedNodes]
        for name, value in nodes:
            if not hasattr(value, "schema"):
                self.out.constants.append((upper(name), repr(value), self._comments.get(name, "")))
            elif value.schema.node.which() == "enum":
                self._enum(name, value.schema)
        self.structs = {name for name, value in nodes if hasattr(value, "schema")}
        for name, value in nodes:
            if not hasattr(value, "schema") or value.schema.node.which() != "struct":
                continue
            if name == ENVELOPE:
                self._envelope(value.schema)
            elif f"List({name})" not in CONVERTERS and name not in CONVERTERS:
                self._struct(name, name, value.schema, STRUCTS.get(name, Struct()))
        for enum_name, members in self._kind_enums.items():
            self.out.enums.append(PyEnum(enum_name, "", [(upper(member), member, doc) for member, doc in members]))
        classes = {py.name: py for py in self.out.classes}
        for slot, name, value in self._omitted:
            slot.encode[0] = f"if {_not_empty(classes[name], value)}:"
        return self.out

    def _enum(self, name: str, schema: Any) -> None:
        enumerants = schema.node.enum.enumerants
        members = [(upper(e.name), e.name, self._comments.get(f"{name}.{e.name}", "")) for e in enumerants]
        enum = self._enums[schema.node.id] = PyEnum(name, self._comments.get(name, ""), members)
        self.out.enums.append(enum)
        self.out.codec_constants[f"_{upper(name)}"] = f"tuple({self.out.module}.{name})"

    def _envelope(self, schema: Any) -> None:
        for member in sorted(schema.node.struct.fields, key=lambda f: f.discriminantValue):
            self.out.envelope.append((member.name, self._names[member.slot.type.struct.typeId]))

    def _class(self, type_id: int) -> PyClass:
        """The class of a struct, by reference only (it may be declared further down, or in another schema's values
        module, which the values module then imports it from)."""
        if type_id in self._foreign:
            alias, values_module, name = self._foreign[type_id]
            python_name = STRUCTS.get(name, Struct()).name or name
            self.out.imports.setdefault(values_module, set()).add(python_name)
            return PyClass(python_name, "", alias)
        name = self._names[type_id]
        return PyClass(STRUCTS.get(name, Struct()).name or name, "", self.out.module)

    # ---------------------------------------------------------------- reading a field

    def _get(self, reader: str, path: str, name: str) -> str:
        """The read of field `name` of the struct (or group) at `path`: pycapnp's `_get_by_field` with the field's
        object, found once at import (`schemas.field_of`). A reader's `r.name` goes through `__getattr__`, the fallback
        after the normal lookup failed, about five times the cost of `_get(name)`, which finds the field by its name on
        every read, about 1.6 times that of `_get_by_field`: on every message every process decodes."""
        return f"{reader}._get_by_field({self._field_constant(path, name)})"

    def _has(self, reader: str, path: str, name: str) -> str:
        return f"{reader}._has_by_field({self._field_constant(path, name)})"

    def _field_constant(self, path: str, name: str) -> str:
        parts = [upper(part) for part in (*path.split("."), name)]
        constant = f"_{self.out.module.upper()}_{'__'.join(parts)}"
        self.out.codec_constants[constant] = f'field_of("{self.out.module}", "{path}.{name}")'
        return constant

    # ---------------------------------------------------------------- structs and groups

    def _struct(self, path: str, name: str, schema: Any, options: Struct) -> PyClass:
        py = PyClass(options.name or name, self._comments.get(path, ""), self.out.module, base=options.base)
        flags = {f.present_if for f in options.fields.values() if isinstance(f, Field) and f.present_if}
        fields = schema.node.struct.fields
        plain = [f for f in fields if f.discriminantValue == _NOT_IN_A_UNION and f.name not in flags]
        slots = [self._field(path, py, schema, f, options.fields.get(f.name)) for f in plain]
        members = [f for f in fields if f.discriminantValue != _NOT_IN_A_UNION]
        if members:
            where = _Union(py, path, "union", _by_discriminant(members), min(f.codeOrder for f in members),
                           min(_ordinal(schema, f) for f in members), "b", "r")  # fmt: skip
            slots.append(self._union(where, options.fields.get("union")))
        required = options.required.split()
        named = {*required, *options.fields, *options.write_last.split()} - {slot.name for slot in slots} - flags
        if named:
            raise ValueError(f"mapping: {name} has no field {sorted(named)}")
        slots.sort(key=lambda slot: (slot.name not in required, slot.code_order))
        for slot in slots:
            for attribute in slot.attributes:
                if slot.name in required:
                    attribute.default = None
                elif attribute.default is None:
                    raise ValueError(f"mapping: {name}.{slot.name} has no default: require it")
        py.attributes = [attribute for slot in slots for attribute in slot.attributes]
        py.extras = [_extra(extra.declaration, extra.doc) for extra in options.extra]
        py.slots = slots
        py.write_last = tuple(options.write_last.split())
        self.out.codec_constants[py.constructor] = f"constructor({py.reference})"
        self.out.classes.append(py)
        return py

    def _field(self, path: str, py: PyClass, schema: Any, f: Any, option: Field | UnionOption | None) -> Slot:
        if f.which() == "group":
            group = schema.fields[f.name].schema
            members = list(group.node.struct.fields)
            ordinal = min(_ordinal(group, member) for member in members)
            if group.node.struct.discriminantCount:
                where = _Union(py, f"{path}.{f.name}", f.name, _by_discriminant(members), f.codeOrder, ordinal,
                               f"b.{f.name}", self._get("r", path, f.name))  # fmt: skip
                return self._union(where, option)
            nested = self._struct(f"{path}.{f.name}", f.name[0].upper() + f.name[1:], group, Struct())
            return self._struct_slot(path, f, nested, _field_option(option), ordinal, nested.doc, group=True)
        option = _field_option(option)
        doc = self._comments.get(f"{path}.{f.name}", "")
        converter = CONVERTERS.get(self._type_name(f.slot.type))
        if converter is not None:
            attr = option.attr or snake(f.name)
            attribute = Attribute(attr, converter.type, option.default or converter.default, doc)
            encode = [f'{converter.encode}(b, "{f.name}", v.{attr})']
            read = f"{converter.decode}({self._get('r', path, f.name)})"
            return Slot(f.codeOrder, f.ordinal.explicit, f.name, [attribute], encode, [], [read])
        if f.slot.type.which() == "struct":
            return self._struct_slot(path, f, self._class(f.slot.type.struct.typeId), option, f.ordinal.explicit, doc)
        return self._plain(path, f, option, doc)

    def _type_name(self, type_: Any) -> str:
        kind = type_.which()
        if kind == "struct":
            return str(self._names.get(type_.struct.typeId, ""))
        if kind == "list":
            return f"List({self._type_name(type_.list.elementType)})"
        return str(kind)

    def _plain(self, path: str, f: Any, option: Field, doc: str) -> Slot:
        name, attr = f.name, option.attr or snake(f.name)
        kind = f.slot.type.which()
        setup: list[str] = []
        if kind in _SCALARS:
            annotation, default = _SCALARS[kind]
            id_type = ID_TYPES.get(name) if kind == "data" else None
            if id_type is not None:
                annotation, default = id_type, f'{id_type}(b"")'
            read, written = self._get("r", path, name), f"v.{attr}"
        elif kind == "enum":
            enum = self._enums[f.slot.type.enum.typeId]
            annotation, default = enum.name, f"{enum.name}.{enum.members[0][0]}"
            read, written = f"_{upper(enum.name)}[{self._get('r', path, name)}.raw]", f"v.{attr}.value"
        elif kind == "list":
            annotation, read, written = self._list(path, f, attr, setup)
            default = "()"
        else:
            raise ValueError(f"mapping: no Python type for {name} ({kind})")
        if option.decode:
            read = f"{option.decode}({read})"
        if option.encode:
            written = f"{option.encode}({written})"
        encode = [written if written.startswith("set_structs(") else f"b.{name} = {written}"]
        if option.omit_empty:
            encode = [f"if v.{attr}:", f"    {encode[0]}"]
        attribute = Attribute(attr, option.type or annotation, option.default or default, doc)
        return Slot(f.codeOrder, f.ordinal.explicit, name, [attribute], encode, setup, [read])

    def _list(self, path: str, f: Any, attr: str, setup: list[str]) -> tuple[str, str, str]:
        """Annotation, read and written value of a list field."""
        element = f.slot.type.list.elementType
        # a list never written is a null pointer: asking whether it is there costs a third of reading it and its length
        get, present = self._get("r", path, f.name), self._has("r", path, f.name)
        if element.which() == "struct":
            target = self._class(element.struct.typeId)
            read = f"tuple(map(read_{target.function}, {get})) if {present} else ()"
            return f"tuple[{target.name}, ...]", read, f'set_structs(b, "{f.name}", v.{attr}, write_{target.function})'
        if _SCALARS.get(element.which(), ("",))[0] == "int":
            return "tuple[int, ...]", f"tuple({get}) if {present} else ()", f"v.{attr}"
        if element.which() not in ("text", "data"):
            raise ValueError(f"mapping: no Python type for {f.name} (a list of {element.which()})")
        item = "str" if element.which() == "text" else ID_TYPES.get(f.name, "bytes")
        return f"tuple[{item}, ...]", f"tuple({get}) if {present} else ()", f"v.{attr}"

    def _struct_slot(
        self, path: str, f: Any, target: PyClass, option: Field, ordinal: int, doc: str, group: bool = False
    ) -> Slot:
        attr = option.attr or snake(f.name)
        value, write, read = f"v.{attr}", f"write_{target.function}", f"read_{target.function}"
        place = f"b.{f.name}" if group else f'b.init("{f.name}")'
        if option.present_if or option.optional:
            annotation, default = f"{target.name} | None", "None"
            present = self._get("r", path, option.present_if) if option.present_if else self._has("r", path, f.name)
            encode = [f"if {value} is not None:"]
            if option.present_if:
                encode.append(f"    b.{option.present_if} = True")
            encode.append(f"    {write}({place}, {value})")
            decode = f"{read}({self._get('r', path, f.name)}) if {present} else None"
        else:
            annotation, default = target.name, f"field(default_factory={target.name})"
            encode, decode = [f"{write}({place}, {value})"], f"{read}({self._get('r', path, f.name)})"
            if option.omit_empty:
                empty = f"_{upper(target.name)}"
                self.out.codec_constants[empty] = f"{target.reference}()"
                encode = ["if ...:", f"    {encode[0]}"]  # the test is written once every class is known
                decode = f"{read}({self._get('r', path, f.name)}) if {self._has('r', path, f.name)} else {empty}"
        attribute = Attribute(attr, option.type or annotation, option.default or default, doc)
        slot = Slot(f.codeOrder, ordinal, f.name, [attribute], encode, [], [decode])
        if option.omit_empty and not (option.present_if or option.optional):
            self._omitted.append((slot, target.name, value))
        return slot

    # ---------------------------------------------------------------- unions

    def _union(self, where: _Union, option: Field | UnionOption | None) -> Slot:
        if isinstance(option, Kind):
            return self._kind(where, option)
        if isinstance(option, OneOf):
            return self._one_of(where, option)
        if isinstance(option, Members):
            return self._members(where)
        raise ValueError(f"mapping: say how {where.py.name}'s union {where.name!r} is held (Kind, OneOf or Members)")

    def _kind(self, where: _Union, option: Kind) -> Slot:
        """Members all Data or Void: an enum of the members and the member's bytes."""
        enum = f"{self.out.module}.{option.enum}"
        known = self._kind_enums.setdefault(option.enum, [])
        wanted = [(member.name, self._comments.get(f"{where.path}.{member.name}", "")) for member in where.members]
        if len(wanted) > len(known):  # the union with the most members gives the enum's order
            self._kind_enums[option.enum] = wanted + [item for item in known if item not in wanted]
        tests, writes, reads = [], [], []
        for member in where.members:
            kind = member.slot.type.which()
            if kind not in ("void", "data"):
                raise ValueError(f"mapping: {where.py.name}'s member {member.name} is neither Void nor Data (Kind)")
            data = self._get(where.reader, where.path, member.name) if kind == "data" else 'b""'
            tests.append(f"v.{option.kind} is {enum}.{upper(member.name)}")
            writes.append([f"{where.base}.{member.name} = {f'v.{option.data}' if kind == 'data' else 'None'}"])
            reads.append([f"{option.kind}, {option.data} = {enum}.{upper(member.name)}, {data}"])
        not_member = f'ValueError(f"{{v.{option.kind}}} is not a member of this union")'
        data_first = sorted(range(len(tests)), key=lambda i: where.members[i].slot.type.which() == "void")
        encode = where.branches([tests[i] for i in data_first], [writes[i] for i in data_first], not_member)
        setup = where.which() + where.branches(_discriminants(where), reads, _UNKNOWN_MEMBER)
        doc = self._comments.get(f"{where.path}.{where.name}" if where.name == "union" else where.path, "")
        attributes = [
            Attribute(option.kind, option.enum, f"{option.enum}.{upper(where.members[0].name)}"),
            Attribute(option.data, "bytes", 'b""', doc),
        ]
        return where.slot(attributes, encode, setup, [option.kind, option.data])

    def _one_of(self, where: _Union, option: OneOf) -> Slot:
        """One attribute holding the member's value: its struct's class, a wrapper class, or the value itself."""
        tests, writes, reads, types = [], [], [], []
        for member in where.members:
            test, write, read, type_ = self._one_member(where, member, option.members.get(member.name, Member()))
            tests.append(test)
            writes.append([write])
            reads.append([f"{option.attr} = {read}"])
            types.append(type_)
        # bool is an int: test it first
        order = sorted(range(len(tests)), key=lambda index: tests[index] == "isinstance(x, int)")
        not_member = 'TypeError(f"{type(x).__name__} is not a member of this union")'
        encode = [f"x = v.{option.attr}"]
        encode += where.branches([tests[i] for i in order], [writes[i] for i in order], not_member)
        declared = [f"{option.attr}: {self.out.module}.{option.alias}"]
        setup = where.which() + declared + where.branches(_discriminants(where), reads, _UNKNOWN_MEMBER)
        self.out.aliases.append((option.alias, [t for t in types if t != "None"] + [t for t in types if t == "None"]))
        if option.enum:
            members = [(upper(member.name), member.name, "") for member in where.members]
            self.out.enums.append(PyEnum(option.enum, f"The members of {where.py.name}.{where.name}.", members))
            table = f"{upper(option.enum)}_OF_{upper(option.attr)}"
            self.out.tables.append(
                (table, option.enum, [(t, name) for t, (name, _, _) in zip(types, members, strict=True)])
            )
            doc = f"Which member of the schema's union `{where.name}` `{option.attr}` holds."
            where.py.properties.append((where.name, option.enum, doc, f"{table}[type(self.{option.attr})]"))
        default = "None" if "None" in types else None  # a Void member held as None: that is the default
        attribute = Attribute(option.attr, option.alias, default, self._comments.get(where.path, ""))
        return where.slot([attribute], encode, setup, [option.attr])

    def _one_member(self, where: _Union, member: Any, chosen: Member) -> tuple[str, str, str, str]:
        """The type test, write and read of one member of a OneOf union, and the type it is held as."""
        kind, name = member.slot.type.which(), member.name
        field_reader = self._get(where.reader, where.path, member.name)
        if chosen.bare:
            held = {"void": "None", "bool": "bool", "text": "str", "data": "bytes"}.get(kind, "int")
            test = "x is None" if held == "None" else f"isinstance(x, {held})"
            write = f"{where.base}.{name} = {'None' if held == 'None' else 'x'}"
            return test, write, "None" if held == "None" else field_reader, held
        if chosen.wrapper:
            wrapper = PyClass(chosen.wrapper, self._comments.get(f"{where.path}.{name}", ""), self.out.module)
            self.out.classes.append(wrapper)
            if kind == "void":
                return (
                    f"isinstance(x, {wrapper.reference})",
                    f"{where.base}.{name} = None",
                    f"{wrapper.reference}()",
                    wrapper.name,
                )
            wrapper.attributes = [Attribute(chosen.attr, chosen.type, None)]
            value = f"tuple({field_reader})" if kind == "list" else field_reader
            write = f"{where.base}.{name} = x.{chosen.attr}"
            return f"isinstance(x, {wrapper.reference})", write, f"{wrapper.reference}({value})", wrapper.name
        if kind != "struct":
            raise ValueError(f"mapping: say what {where.py.name}'s union member {name} holds in Python (Member)")
        target = self._class(member.slot.type.struct.typeId)
        write = f'write_{target.function}({where.base}.init("{name}"), x)'
        return f"isinstance(x, {target.reference})", write, f"read_{target.function}({field_reader})", target.name

    def _members(self, where: _Union) -> Slot:
        """Void and struct members: one optional attribute per struct member (none set: the Void member)."""
        structs = [member for member in where.members if member.slot.type.which() == "struct"]
        voids = [member for member in where.members if member.slot.type.which() == "void"]
        if not voids or len(structs) + len(voids) != len(where.members):
            raise ValueError(f"mapping: {where.py.name}'s union is not one of Void and struct members (Members)")
        attributes, tests, writes, args = [], [], [], []
        for member in structs:
            target, attr = self._class(member.slot.type.struct.typeId), snake(member.name)
            doc = self._comments.get(f"{where.path}.{member.name}", "")
            attributes.append(Attribute(attr, f"{target.name} | None", "None", doc))
            tests.append(f"v.{attr} is not None")
            writes.append([f'write_{target.function}({where.base}.init("{member.name}"), v.{attr})'])
            read = f"read_{target.function}({self._get(where.reader, where.path, member.name)})"
            args.append(f'{read} if which == "{member.name}" else None')
        encode = [*where.branches(tests, writes, "")[:-1], f"    {where.base}.{voids[0].name} = None"]
        return where.slot(attributes, encode, where.which(), args)


_UNKNOWN_MEMBER = 'ValueError(f"unknown union member {which}")'


def _discriminants(where: _Union) -> list[str]:
    return [f'which == "{member.name}"' for member in where.members]


def _by_discriminant(members: list[Any]) -> list[Any]:
    return sorted(members, key=lambda member: member.discriminantValue)


_ZEROS = ("0", "0.0", "False", '""', 'b""', "()")


def _not_empty(py: PyClass, value: str) -> str:
    """A test that a struct value is not its default: its attributes' truth when they all default to a zero (as
    fast as the hand-written codec's), else a comparison with the default value."""
    if py.attributes and all(attribute.default in _ZEROS for attribute in py.attributes):
        return " or ".join(f"{value}.{attribute.name}" for attribute in py.attributes)
    return f"{value} != _{upper(py.name)}"


def _field_option(option: Field | UnionOption | None) -> Field:
    if option is None:
        return Field()
    if not isinstance(option, Field):
        raise ValueError(f"mapping: {option} applies to a union, not to a field")
    return option


def _extra(declaration: str, doc: str) -> Attribute:
    """`name: annotation = default` (not on the wire)."""
    match = re.fullmatch(r"(\w+): (.+?) = (.+)", declaration)
    if match is None:
        raise ValueError(f"mapping: {declaration!r} is not `name: type = default`")
    return Attribute(match.group(1), match.group(2), match.group(3), doc)


def _ordinal(schema: Any, f: Any) -> int:
    if f.which() == "group":
        group = schema.fields[f.name].schema
        return min(_ordinal(group, member) for member in group.node.struct.fields)
    return int(f.ordinal.explicit)
