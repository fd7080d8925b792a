"""Each message is declared once, in the schema: the Python values and the codec are generated from it
(scaler/protocol/generate), and the checked-in files are what the schemas and the mapping table give today. A
schema edit without `python -m scaler.protocol.generate` fails here (checked by hand: a field appended to
JobAttach in message.capnp, not regenerated, fails this test naming messages.py and codec_structs.py).

The protocol's surface (every message, union member and enumerant a peer may receive) is recorded per protocol
version in `protocol_surface.txt`: a new one with the same `protocolVersion` fails here, because a peer of that
version would refuse a frame it cannot read instead of being refused at its hello (checked by hand: an enumerant
added to LogStream fails this test; appending a field does not)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import capnp

from scaler.protocol import messages as m
from scaler.protocol.generate import PROTOCOL, SCHEMAS, render

SURFACE = Path(__file__).with_name("protocol_surface.txt")


def test_the_generated_modules_are_what_the_schemas_give() -> None:
    stale = sorted(path.name for path, text in render().items() if path.read_text() != text)
    assert stale == [], f"{', '.join(stale)} out of date: run `python -m scaler.protocol.generate`"


def surface() -> list[str]:
    """What a peer may receive: the members of every union and the enumerants of every enum, by schema."""
    capnp.remove_import_hook()
    lines = []
    for schema_file, _, _, _ in SCHEMAS:
        schema = capnp.load(os.fspath(PROTOCOL / schema_file))
        for node in schema.schema.node.nestedNodes:
            declared = getattr(schema, node.name)
            if not hasattr(declared, "schema"):
                continue
            lines += _unions(node.name, declared.schema) if declared.schema.node.which() == "struct" else []
            if declared.schema.node.which() == "enum":
                lines.append(f"{node.name} = {' '.join(e.name for e in declared.schema.node.enum.enumerants)}")
    return lines


def _unions(path: str, struct: capnp.lib.capnp._StructSchema) -> list[str]:
    fields = struct.node.struct.fields
    members = sorted((f for f in fields if f.discriminantValue != 0xFFFF), key=lambda f: f.discriminantValue)
    lines = [f"{path} | {' '.join(f.name for f in members)}"] if members else []
    for f in fields:
        if f.which() == "group":
            lines += _unions(f"{path}.{f.name}", struct.fields[f.name].schema)
    return lines


def recorded() -> dict[int, list[str]]:
    versions: dict[int, list[str]] = {}
    for line in SURFACE.read_text().splitlines():
        if line.startswith("#"):
            continue
        version, _, rest = line.partition(" ")
        versions.setdefault(int(version), []).append(rest)
    return versions


def test_the_surface_a_peer_reads_changes_only_with_the_protocol_version() -> None:
    kept = recorded().get(m.PROTOCOL_VERSION)
    assert kept is not None, f"record version {m.PROTOCOL_VERSION}'s surface in {SURFACE.name} (see its first lines)"
    added = sorted(set(surface()) - set(kept))
    assert surface() == kept, (
        f"the schema changed what a peer of protocol version {m.PROTOCOL_VERSION} reads ({added}): raise "
        f"protocolVersion in message.capnp and record the new surface (docs/protocol.md, section 4.6)"
    )


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    if m.PROTOCOL_VERSION in recorded():
        sys.exit(f"version {m.PROTOCOL_VERSION} is recorded already: raise protocolVersion in message.capnp first")
    with SURFACE.open("a") as out:
        out.writelines(f"{m.PROTOCOL_VERSION} {line}\n" for line in surface())


def test_the_generated_readers_reach_fields_through_get() -> None:
    """Every field a generated reader reads goes through pycapnp's `_get_by_field` (or `_has_by_field`, `_which_str`)
    with the field's object found once at import: `r.name` on a capnp reader is `__getattr__`, the fallback after the
    normal lookup failed, about five times `_get(name)`'s cost per field, itself 1.6 times `_get_by_field`'s (it finds
    the field by its name on every read), on every message every process decodes; `_which()` builds an enum object,
    about five times `_which_str()`'s cost.
    Checked by hand: the generator's `_get` helper made to emit `r.name` or `r._get(name)` again, or its unions made to
    read `_which().raw`, fails this test naming the reads."""
    import ast

    from scaler.protocol import codec_structs

    tree = ast.parse(Path(codec_structs.__file__).read_text())
    readers = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("read_")]
    assert readers, "no generated readers found"
    slow = sorted(
        f"{function.name}: r.{node.attr}"
        for function in readers
        for node in ast.walk(function)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "r"
        and node.attr not in ("_get_by_field", "_has_by_field", "_which_str")
    )
    assert slow == [], f"generated readers reading fields by attribute: {slow[:10]}"
