"""Prints the Python source of a values module (the dataclasses and enums of one schema) and of the codec's
structs module, laid out as `ruff format` lays them out."""

from __future__ import annotations

import ast
import re
import textwrap

from scaler.protocol.generate.model import Attribute, Module, PyClass, PyEnum

WIDTH = 120
_IDS = ("ClientID", "GraphID", "ObjectID", "TaskID", "WorkerID")


def comment(text: str, indent: int) -> list[str]:
    if not text:
        return []
    prefix = " " * indent + "#: "
    return textwrap.wrap(text, WIDTH - len(prefix), initial_indent=prefix, subsequent_indent=prefix)


def docstring(text: str, indent: int) -> list[str]:
    """Paragraphs are separated by a blank line."""
    if not text:
        return []
    pad = " " * indent
    if len(pad) + len(text) + 6 <= WIDTH and "\n" not in text:
        return [f'{pad}"""{text}"""']
    lines: list[str] = []
    for paragraph in text.split("\n\n"):
        if lines:
            lines.append("")
        lines += textwrap.wrap(paragraph, WIDTH - indent - 3, initial_indent=pad, subsequent_indent=pad)
    lines[0] = f'{pad}"""{lines[0][indent:]}'
    if len(lines[-1]) + 3 <= WIDTH:
        lines[-1] += '"""'
    else:
        lines.append(f'{pad}"""')
    return lines


def call(head: str, arguments: list[str], indent: int, tail: str = ")") -> list[str]:
    """`head` ends with the opening bracket; the lines ruff format makes of the call."""
    pad = " " * indent
    one_line = f"{pad}{head}{', '.join(arguments)}{tail}"
    if len(one_line) <= WIDTH:
        return [one_line]
    inner = f"{pad}    {', '.join(arguments)}"
    if len(inner) <= WIDTH:
        return [f"{pad}{head}", inner, f"{pad}{tail}"]
    lines = [f"{pad}{head}"]
    for argument in arguments:
        if len(pad) + 4 + len(argument) + 1 > WIDTH and " if " in argument and " else " in argument:
            value, rest = argument.split(" if ", 1)  # too long for a line: ruff splits a conditional at its keywords
            test, otherwise = rest.rsplit(" else ", 1)
            lines += [f"{pad}    {value}", f"{pad}    if {test}", f"{pad}    else {otherwise},"]
        else:
            lines.append(f"{pad}    {argument},")
    return [*lines, f"{pad}{tail}"]


def sequence(head: str, items: list[str], tail: str) -> list[str]:
    """A bracketed sequence one item a line, with the magic trailing comma (ruff keeps it that way)."""
    return [head, *(f"    {item}," for item in items), tail]


def _attribute(attribute: Attribute) -> list[str]:
    line = f"    {attribute.name}: {attribute.annotation}"
    if attribute.default is not None:
        line += f" = {attribute.default}"
    return [*comment(attribute.doc, 4), line]


def _enum(enum: PyEnum) -> list[str]:
    lines = [f"class {enum.name}(enum.Enum):", *docstring(enum.doc, 4)]
    if enum.doc:
        lines.append("")
    for name, value, doc in enum.members:
        lines += [*comment(doc, 4), f'    {name} = "{value}"']
    return lines


def _class(py: PyClass) -> list[str]:
    """A frozen slotted dataclass whose `__init__` is written out here and whose other methods are `FrozenValue`'s
    (`frozen_value`): dataclasses compiles none at import."""
    bases = f"{py.base}, FrozenValue" if py.base else "FrozenValue"
    lines = ["@frozen_value", f"class {py.name}({bases}):"]
    body: list[str] = []
    attributes = [*py.attributes, *py.extras]
    for attribute in attributes:
        body += _attribute(attribute)
    if body:
        body.append("")
    body += _init(attributes)
    for name, type_, doc, expression in py.properties:
        body += ["", "    @property", f"    def {name}(self) -> {type_}:", *docstring(doc, 8)]
        body.append(f"        return {expression}")
    if py.doc:
        lines += [*docstring(py.doc, 4), ""]
    return lines + body


def _init(attributes: list[Attribute]) -> list[str]:
    """The `__init__` dataclasses would compile: the same parameters, defaults and default factories (a parameter
    whose field has a factory defaults to `FACTORY`), each field set once."""
    parameters, sets = ["self"], []
    for attribute in attributes:
        default, factory, init = _field_default(attribute.default)
        value = attribute.name
        if not init:
            sets.append(f'        _set(self, "{attribute.name}", {default})')
            continue
        if factory is not None:
            parameters.append(f"{attribute.name}: {attribute.annotation} = FACTORY")
            value = f"{factory}() if {attribute.name} is FACTORY else {attribute.name}"
        elif default is not None:
            parameters.append(f"{attribute.name}: {attribute.annotation} = {default}")
        else:
            parameters.append(f"{attribute.name}: {attribute.annotation}")
        sets.append(f'        _set(self, "{attribute.name}", {value})')
    return [*call("def __init__(", parameters, 4, ") -> None:"), *(sets or ["        pass"])]


def _field_default(default: str | None) -> tuple[str | None, str | None, bool]:
    """A field's default expression, its default factory's, and whether `__init__` takes it."""
    if default is None or not default.startswith("field("):
        return default, None, True
    tree = ast.parse(default, mode="eval").body
    assert isinstance(tree, ast.Call), default
    keywords = {keyword.arg: ast.get_source_segment(default, keyword.value) for keyword in tree.keywords}
    return keywords.get("default"), keywords.get("default_factory"), keywords.get("init") != "False"


def _import(module: str, names: list[str]) -> list[str]:
    names = sorted(names, key=_isort)
    line = f"from {module} import {', '.join(names)}"
    if not names or len(line) <= WIDTH:
        return [line] if names else []
    return sequence(f"from {module} import (", names, ")")


def _isort(name: str) -> tuple[int, str]:
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[0].isupper() else 2
    return kind, name


def values_module(module: Module, doc: str, extras_module: str, extras: list[str]) -> str:
    classes = [py.name for py in module.classes]
    enums = [enum.name for enum in module.enums]
    public = [name for name, _, _ in module.constants] + enums + classes + [alias for alias, _ in module.aliases]
    public += [table for table, _, _ in module.tables]
    if module.envelope:
        public += ["Message", "MESSAGE_TYPES"]
    source = "\n".join(f"{a.annotation} {a.default}" for py in module.classes for a in py.attributes)
    ids = [name for name in _IDS if re.search(rf"\b{name}\b", source)]
    lines = [*docstring(doc, 0), "", "from __future__ import annotations", ""]
    if module.enums:
        lines.append("import enum")
    lines += ["from dataclasses import field"] if "field(" in source + _extras(module) else []
    lines.append("")
    lines += _imports(module, ids, extras_module, extras)
    lines += ["", *sequence("__all__ = [", [f'"{name}"' for name in sorted({*public, *extras}, key=_isort)], "]")]
    if module.classes:
        lines += [
            "",
            "#: how each `__init__` sets a field of a frozen value (as dataclasses' own does)",
            "_set = object.__setattr__",
        ]
    for name, value, doc in module.constants:
        lines += ["", *comment(doc, 0), f"{name} = {value}"]
    for enum in module.enums:
        lines += ["", "", *_enum(enum)]
    for py in module.classes:
        lines += ["", "", *_class(py)]
    lines.append("")
    for alias, members in module.aliases:
        line = f"{alias} = {' | '.join(members)}"
        if len(line) <= 120:
            lines += ["", line]
        elif len(f"    {' | '.join(members)}") <= 120:  # as ruff format wraps it
            lines += ["", f"{alias} = (", f"    {' | '.join(members)}", ")"]
        else:
            lines += ["", f"{alias} = (", f"    {members[0]}", *(f"    | {member}" for member in members[1:]), ")"]
    for table, enum_name, pairs in module.tables:
        entries = [f"{cls}: {enum_name}.{member}" for cls, member in pairs]
        lines += ["", *sequence(f"{table}: dict[type, {enum_name}] = {{", entries, "}")]
    if module.envelope:
        names = [cls for _, cls in module.envelope]
        lines += ["", "Message = (", f"    {names[0]}", *(f"    | {name}" for name in names[1:]), ")"]
        lines += ["", "#: Every message type, in the order of the envelope's union (its discriminant)."]
        lines += sequence("MESSAGE_TYPES: tuple[type, ...] = (", names, ")")
    return "\n".join(lines) + "\n"


def _imports(module: Module, ids: list[str], extras_module: str, extras: list[str]) -> list[str]:
    """The values module's imports from the protocol package, sorted by module: the ids, the hand-written extras, and
    the classes of another schema's values module that this schema imports."""
    imports = {f"scaler.protocol.{name}": sorted(names) for name, names in module.imports.items()}
    if ids:
        imports["scaler.protocol.ids"] = ids
    imports[extras_module] = extras
    if module.classes:
        factories = any(_field_default(a.default)[1] for py in module.classes for a in [*py.attributes, *py.extras])
        imports["scaler.protocol.frozen_values"] = ["FrozenValue", "frozen_value", *(["FACTORY"] if factories else [])]
    return [line for imported in sorted(imports) for line in _import(imported, imports[imported])]


def _extras(module: Module) -> str:
    return "\n".join(extra.default or "" for py in module.classes for extra in py.extras)


# ---------------------------------------------------------------- the codec


def _writer(py: PyClass) -> list[str]:
    assert py.slots is not None
    order = sorted(py.slots, key=lambda slot: slot.ordinal)
    order = [slot for slot in order if slot.name not in py.write_last]
    order += [slot for name in py.write_last for slot in py.slots if slot.name == name]
    body = [f"    {line}" for slot in order for line in slot.encode]
    return [f"def write_{py.function}(b: Any, v: {py.reference}) -> None:{_branchy(body)}", *(body or ["    pass"])]


def _branchy(body: list[str]) -> str:
    """A noqa for a function whose union has more members than the complexity limit allows branches."""
    branches = sum(1 for line in body if line.lstrip().startswith(("if ", "elif ")))
    return "  # noqa: C901 - one branch per union member" if branches > 11 else ""


def _reader(py: PyClass) -> list[str]:
    assert py.slots is not None
    body = [f"    {line}" for slot in py.slots for line in slot.decode_setup]
    arguments = [argument for slot in py.slots for argument in slot.decode_args]
    head = f"def read_{py.function}(r: Any) -> {py.reference}:{_branchy(body)}"
    return [head, *body, *call(f"return {py.constructor}(", arguments, 4)]


def codec_module(modules: list[Module], doc: str, helpers: list[str]) -> str:
    lines = [*docstring(doc, 0), "", "from __future__ import annotations", ""]
    functions: list[str] = []
    for module in modules:
        for py in module.classes:
            if py.slots is not None:
                functions += ["", "", *_writer(py), "", "", *_reader(py)]
    text = "\n".join(functions)
    if "sys." in text:
        lines.append("import sys")
    lines += ["from collections.abc import Callable", "from typing import Any", ""]
    lines += [f"from scaler.protocol import {module.name} as {module.module}" for module in modules]
    constants = "\n".join(expression for module in modules for expression in module.codec_constants.values())
    used = [helper for helper in helpers if re.search(rf"\b{helper}\(", f"{text}\n{constants}")]
    lines += _import("scaler.protocol.codec_fields", used)
    lines.append("")
    for module in modules:
        for name, expression in module.codec_constants.items():
            lines.append(f"{name} = {expression}")
    lines += functions
    for module in modules:
        if module.envelope:
            lines += ["", "", *_envelope(module)]
    return "\n".join(lines) + "\n"


def _envelope(module: Module) -> list[str]:
    functions = {py.name: py.function for py in module.classes}
    writers = [f'{module.module}.{cls}: ("{name}", write_{functions[cls]})' for name, cls in module.envelope]
    readers = [f'"{name}": ("{name}", read_{functions[cls]})' for name, cls in module.envelope]
    lines = ["#: Each message type: its member of the envelope (Message) and its writer."]
    lines += sequence("WRITERS: dict[type, tuple[str, Callable[[Any, Any], None]]] = {", writers, "}")
    lines += ["#: Each member of the envelope, by its name (a reader's `_which_str()`): that name, and its reader."]
    head = f"READERS: dict[str, tuple[str, Callable[[Any], {module.module}.Message]]] = {{"
    return lines + sequence(head, readers, "}")
