"""Frames built to hurt the decoder: one that claims far more than it holds is refused at once (a list of 222
million empty structs in 80 bytes used to keep a server busy for minutes), and mutations of valid frames
(truncated, bit-flipped, random) either decode or raise DecodeError, never anything else."""

from __future__ import annotations

import os
import random
import struct

import capnp
import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol import storage_messages as sm
from scaler.protocol.generate import PROTOCOL


def amplification_frame() -> bytes:
    frame = bytearray(codec.encode(m.ManagerTarget(entries=(m.TargetEntry(capabilities=(), workers=1),))))
    frame[32:40] = struct.pack("<II", 9, 7)  # the entries: a composite list of 0 words at offset 2
    frame[56:64] = struct.pack("<IHH", 222_000_000 << 2, 0, 0)  # its tag: 222M structs of 0 data, 0 pointers
    return bytes(frame)


@pytest.mark.timeout(10)
def test_a_frame_claiming_a_huge_list_is_refused_at_once() -> None:
    with pytest.raises(codec.DecodeError, match="traversal limit"):
        codec.decode(amplification_frame())


def samples() -> list[bytes]:
    hello = m.Hello(m.PROTOCOL_VERSION, "3.11.7", 1, "host", m.ClientInfo("fuzz"))
    target = m.ManagerTarget(
        entries=(m.TargetEntry(capabilities=(("gpu", 1),), workers=3),), drain=("a", "b"), connected=("c",)
    )
    return [codec.encode(message) for message in (hello, target, m.TaskCancel((b"x" * 16,)), m.ClientDisconnect())]


@pytest.mark.timeout(60)
def test_mutated_frames_decode_or_raise_decode_error() -> None:
    chance = random.Random(20261122)
    for frame in samples():
        for _ in range(500):
            mutated = bytearray(frame)
            kind = chance.randrange(3)
            if kind == 0:
                mutated = mutated[: chance.randrange(len(mutated))]
            elif kind == 1:
                for _ in range(chance.randrange(1, 6)):
                    mutated[chance.randrange(len(mutated))] ^= 1 << chance.randrange(8)
            else:
                mutated = bytearray(chance.randbytes(chance.randrange(1, 200)))
            try:
                codec.decode(bytes(mutated))
            except codec.DecodeError:
                pass


def _struct(frame: bytearray, pointer_word: int) -> tuple[int, int]:
    """The first word of the data section and of the pointer section of the struct a pointer points to (frames of
    one segment: the segment starts at byte 8)."""
    (value,) = struct.unpack_from("<q", frame, 8 + 8 * pointer_word)
    offset = (value & 0xFFFFFFFF) >> 2
    offset -= (1 << 30) if offset >= 1 << 29 else 0
    start = pointer_word + 1 + offset
    return start, start + ((value >> 32) & 0xFFFF)


def _set_16(frame: bytearray, data_word: int, offset_16: int, value: int) -> bytes:
    struct.pack_into("<H", frame, 8 + 8 * data_word + 2 * offset_16, value)
    return bytes(frame)


def _nested(message: m.Message) -> tuple[bytearray, int, int]:
    """A message's frame and the data and pointer words of the message's own struct (under the envelope)."""
    frame = bytearray(codec.encode(message))
    _, envelope_pointers = _struct(frame, 0)
    data, pointers = _struct(frame, envelope_pointers)
    return frame, data, pointers


def _discriminant(schema: object) -> int:
    return int(schema.node.struct.discriminantOffset)  # type: ignore[attr-defined]


def _enum_offset(schema: object, name: str) -> int:
    return int(schema.fields[name].proto.slot.offset)  # type: ignore[attr-defined]


def unknown_members() -> dict[str, bytes]:
    """Frames whose union discriminant or enum value is beyond the schema, at every depth."""
    schema, storage = (capnp.load(os.fspath(PROTOCOL / name)) for name in ("message.capnp", "object_storage.capnp"))
    hello, hello_data, _ = _nested(m.Hello(1, "3.11.7", 1, "h", m.ClientInfo()))
    result = m.TaskResult(b"t" * 16, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v")
    result_frame, result_data, _ = _nested(result)
    error_frame, error_data, _ = _nested(m.ProtocolError("x", m.ProtocolErrorKind.MALFORMED))
    body = bytearray(codec.encode_body(m.TaskBody(b"f", (m.Argument(m.ArgumentKind.INLINE, b"1"),))))
    _, body_pointers = _struct(body, 0)
    args_tag = _struct(body, body_pointers + 2)[0]  # args (pointer 2) is a composite list: a tag word, then elements
    ping = bytearray(codec.encode(m.Ping(1)))
    reply = codec.encode_storage_reply(sm.StorageReply(1, sm.StorageStatus.OK))
    request = bytearray(codec.encode_storage_request(sm.StorageRequest(1, sm.Info())))
    request_data = _struct(request, 0)[0]
    role = schema.Hello.schema.fields["role"].schema
    reply_data = _struct(bytearray(reply), 0)[0]
    past_last = len(storage.StorageRequest.schema.union_fields)  # one past the request's last member
    return {
        "envelope": _set_16(ping, _struct(ping, 0)[0], 0, 99),
        "Hello.role": _set_16(hello, hello_data, _discriminant(role), 9),
        "TaskResult union": _set_16(bytearray(result_frame), result_data, _discriminant(schema.TaskResult.schema), 7),
        "ResultStatus": _set_16(result_frame, result_data, _enum_offset(schema.TaskResult.schema, "status"), 99),
        "ProtocolErrorKind": _set_16(error_frame, error_data, _enum_offset(schema.ProtocolError.schema, "kind"), 9),
        "Argument union": _set_16(body, args_tag + 1, _discriminant(schema.Argument.schema), 8),
        "StorageReply union": _set_16(bytearray(reply), reply_data, _discriminant(storage.StorageReply.schema), 12),
        "StorageStatus": _set_16(bytearray(reply), reply_data, _enum_offset(storage.StorageReply.schema, "status"), 40),
        "StorageRequest union": _set_16(request, request_data, _discriminant(storage.StorageRequest.schema), past_last),
    }


@pytest.mark.parametrize("name", list(unknown_members()))
def test_an_unknown_union_member_or_enumerant_is_refused_with_a_decode_error(name: str) -> None:
    """What a peer of a later protocol would send (a new message, union member or enumerant) is refused, at any
    depth, never read as something else: capnp refuses an unknown union member when the reader asks which member
    is set, and the generated readers look enumerants up by number in a table of the known ones. Checked by hand:
    with the enum tables falling back to their first enumerant, the three enum cases decode (as SUCCESS, MALFORMED
    and OK) and fail here."""
    frame = unknown_members()[name]
    decode = {"Argument union": codec.decode_body}.get(name)
    if name.startswith("Storage"):
        decode = codec.decode_storage_reply if "Reply" in name or "Status" in name else codec.decode_storage_request
    with pytest.raises(codec.DecodeError):
        (decode or codec.decode)(frame)
