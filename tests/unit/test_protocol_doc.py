"""docs/protocol.md describes every member of the `Message` union: its count in section 2.2, its row in the table
of section 4.1 and its fields in section 4.2 follow message.capnp (checked by hand: without its row for
`processorExited` (#41), the page said "a union of 41 members" of the schema's 43, numbered JobOpen, JobAttach and
JobReply #27 to #29 in section 4.2 (TaskStoryRequest's and TaskStoryReply's numbers), and these tests failed naming
them)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import capnp

from scaler.protocol.generate import PROTOCOL

PAGE = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def schema_members() -> dict[int, tuple[str, str]]:
    """The `Message` union's members by discriminant: (member, struct)."""
    capnp.remove_import_hook()
    message = capnp.load(os.fspath(PROTOCOL / "message.capnp")).Message.schema
    members = {}
    for field in message.node.struct.fields:
        if field.discriminantValue != 0xFFFF:
            members[field.discriminantValue] = (field.name, message.fields[field.name].schema.node.displayName)
    return {number: (name, struct.rpartition(":")[2]) for number, (name, struct) in members.items()}


def documented_members(page: str) -> dict[int, tuple[str, str]]:
    section = page.split("### 4.1 The `Message` envelope", 1)[1].split("### 4.2", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \| `(\w+)` \|", section, flags=re.MULTILINE)
    return {int(number): (name, struct) for number, name, struct in rows}


def test_the_envelope_table_lists_every_member_of_the_schema() -> None:
    page = PAGE.read_text()
    expected, documented = schema_members(), documented_members(page)
    missing = {number: member for number, member in expected.items() if documented.get(number) != member}
    extra = {number: member for number, member in documented.items() if number not in expected}
    assert missing == {} and extra == {}, (
        f"docs/protocol.md section 4.1 disagrees with message.capnp: missing or different {missing}, not in the "
        f"schema {extra}"
    )
    counted = re.search(r"union of (\d+)\s+members", page)
    assert counted is not None and int(counted.group(1)) == len(expected), (
        f"docs/protocol.md section 2.2 says a union of {counted and counted.group(1)} members; message.capnp has "
        f"{len(expected)}"
    )


def test_every_member_has_its_fields_in_section_4_2_under_its_number() -> None:
    section = PAGE.read_text().split("### 4.2 Fields of each message", 1)[1].split("### 4.3", 1)[0]
    structs = {struct: number for number, (_, struct) in schema_members().items()}
    described = re.findall(r"\*\*(\w+)\*\* \(#(\d+)\)", section)
    misnumbered = [(struct, int(number)) for struct, number in described if structs.get(struct) != int(number)]
    assert misnumbered == [], f"docs/protocol.md section 4.2 numbers these wrongly (struct, number): {misnumbered}"
    undescribed = sorted(set(structs) - {struct for struct, _ in described})
    assert undescribed == [], f"docs/protocol.md section 4.2 describes no fields of {undescribed}"
