"""The wire layout of the schemas as plain Python data (`capnp_layout.py`): for each struct and group its section
sizes, where its union's discriminant is, and each field's type and offset, as the Cap'n Proto compiler placed them
(read from the compiled schema). The pure-Python codec (`pure_capnp.py`) reads and writes messages from it where
pycapnp cannot be installed (a browser)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scaler.protocol.generate.emit import docstring

_NOT_IN_A_UNION = 0xFFFF
_SCALAR: tuple[str, ...] = ("void", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")
_SCALAR += ("uint64", "float32", "float64", "text", "data")


class _Schema:
    """The layout of one schema file: its structs (and groups, named `Struct.group`) and enums, and the structs of other
    schemas it imports (`others`: their loaded modules), laid out under their names as if declared here."""

    def __init__(self, loaded: Any, others: Sequence[Any] = ()) -> None:
        self._loaded = loaded
        self._names: dict[int, str] = {}
        self._imported = {
            value.schema.node.id: (node.name, value.schema)
            for other in others
            for node in other.schema.node.nestedNodes
            if (value := getattr(other, node.name, None)) is not None and hasattr(value, "schema")
        }
        self.structs: dict[str, tuple[int, int, int, list[tuple[str, int, str, int, str]]]] = {}
        self.enums: dict[str, list[str]] = {}
        nodes = [(node.name, getattr(loaded, node.name)) for node in loaded.schema.node.nestedNodes]
        typed = [(name, value.schema) for name, value in nodes if hasattr(value, "schema")]
        for name, schema in typed:
            self._names[schema.node.id] = name
        for name, schema in typed:
            if schema.node.which() == "enum":
                self.enums[name] = [enumerant.name for enumerant in schema.node.enum.enumerants]
            else:
                self._struct(name, schema)

    def _struct(self, name: str, schema: Any) -> None:
        node = schema.node.struct
        offset = node.discriminantOffset if node.discriminantCount else -1
        fields: list[tuple[str, int, str, int, str]] = []
        self.structs[name] = (node.dataWordCount, node.pointerCount, offset, fields)
        for f in node.fields:
            discriminant = -1 if f.discriminantValue == _NOT_IN_A_UNION else int(f.discriminantValue)
            if f.which() == "group":
                group = f"{name}.{f.name}"
                fields.append((f.name, discriminant, "group", 0, group))
                self._struct(group, schema.fields[f.name].schema)
            else:
                kind, element = self._type(f.slot.type)
                fields.append((f.name, discriminant, kind, int(f.slot.offset), element))

    def _type(self, type_: Any) -> tuple[str, str]:
        """A slot's type and what it refers to: a struct's or an enum's name, a list's element type."""
        kind = type_.which()
        if kind in _SCALAR:
            return kind, ""
        if kind == "struct":
            type_id = type_.struct.typeId
            if type_id not in self._names and type_id in self._imported:  # another schema's: laid out here too
                name, schema = self._imported[type_id]
                self._names[type_id] = name
                self._struct(name, schema)
            return kind, self._names[type_id]
        if kind == "enum":
            return kind, self._names[type_.enum.typeId]
        if kind == "list":
            element_kind, element = self._type(type_.list.elementType)
            if element_kind in ("list", "enum"):
                raise ValueError("layout: a list of lists or of enums is not supported by the pure-Python codec")
            return kind, f"{element_kind}:{element}" if element else element_kind
        raise ValueError(f"layout: the pure-Python codec does not support the type {kind}")


def layout_module(loaded: dict[str, Any], doc: str) -> str:
    """`loaded`: each schema by the alias of its values module (m, sm)."""
    lines = [*docstring(doc, 0), "", "from __future__ import annotations", ""]
    lines += [
        "#: A field: its name, its discriminant in its struct's union (-1: not in it), its type, its offset (in units",
        "#: of its type's size; a pointer's among the pointers) and what the type refers to (a struct's, an enum's or",
        "#: a group's name, a list's element type).",
        "Field = tuple[str, int, str, int, str]",
        "#: A struct: its data words, its pointers, its discriminant's offset (16-bit units; -1: none), its fields.",
        "Struct = tuple[int, int, int, tuple[Field, ...]]",
        "",
    ]
    for alias, schema in loaded.items():
        model = _Schema(schema, [other for other_alias, other in loaded.items() if other_alias != alias])
        lines += ["", f"#: the enumerants of each enum of the {alias!r} schema, in order"]
        lines.append(f"{alias.upper()}_ENUMS: dict[str, tuple[str, ...]] = {{")
        for name, enumerants in model.enums.items():
            lines += [f'    "{name}": (', *(f'        "{value}",' for value in enumerants), "    ),"]
        lines += ["}", "", f"#: the structs and groups of the {alias!r} schema"]
        lines.append(f"{alias.upper()}_STRUCTS: dict[str, Struct] = {{")
        for name, (data, pointers, offset, fields) in model.structs.items():
            lines += [f'    "{name}": (', f"        {data},", f"        {pointers},", f"        {offset},"]
            rows = [f'("{a}", {b}, "{c}", {d}, "{e}")' for a, b, c, d, e in fields]
            if len(rows) > 1:
                lines += ["        (", *(f"            {row}," for row in rows), "        ),"]
            else:  # ruff format keeps a tuple of one (or none) on one line
                lines.append(f"        ({rows[0]},)," if rows else "        (),")
            lines.append("    ),")
        lines.append("}")
    return "\n".join(lines) + "\n"
