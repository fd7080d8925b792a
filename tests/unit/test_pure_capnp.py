"""The pure-Python Cap'n Proto codec (what the browser client runs: scaler/protocol/pure_capnp.py under the same
generated codec) against pycapnp's: every recorded frame of `wire_golden.txt` decodes to its sample and every sample
encodes to its recorded frame, byte for byte; messages of several segments (pycapnp's, with far pointers) decode;
what the pure builder writes past 8 KiB decodes with pycapnp; bad frames raise DecodeError and nothing else."""

from __future__ import annotations

import importlib
import os
import random
import struct
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from tests.unit import test_hostile_frames, test_wire_golden

#: The modules that hold the chosen implementation: imported afresh to get the codec over the other one.
_CODEC_MODULES = ("scaler.protocol.schemas", "scaler.protocol.codec_fields", "scaler.protocol.codec_structs")


def pure_codec_module() -> ModuleType:
    """A second `scaler.protocol.codec`, over pure_capnp (SCALER_PURE_CAPNP=1 at its import); the messages' classes
    are the process's own, so values compare equal across the two."""
    package = importlib.import_module("scaler.protocol")
    names = (*_CODEC_MODULES, "scaler.protocol.codec")
    kept = {name: sys.modules.pop(name) for name in names}
    attributes = {name: vars(package).pop(name.rsplit(".", 1)[1]) for name in names}
    os.environ["SCALER_PURE_CAPNP"] = "1"
    try:
        pure = importlib.import_module("scaler.protocol.codec")
        assert type(pure._schema).__module__ == "scaler.protocol.pure_capnp"
        assert sys.modules["scaler.protocol.schemas"].BACKEND == "pure"
        return pure
    finally:
        del os.environ["SCALER_PURE_CAPNP"]
        sys.modules.update(kept)
        for name, module in attributes.items():
            setattr(package, name.rsplit(".", 1)[1], module)


@pytest.fixture(scope="module")
def pure() -> Iterator[ModuleType]:
    yield pure_codec_module()


def test_the_native_codec_is_pycapnp_here() -> None:
    """Otherwise the comparisons below would compare the pure codec with itself."""
    assert sys.modules["scaler.protocol.schemas"].BACKEND == "pycapnp"


@pytest.mark.parametrize("name", list(test_wire_golden.MESSAGES))
def test_a_message_is_the_recorded_frame_both_ways(pure: ModuleType, name: str) -> None:
    frame = test_wire_golden.golden()[name]
    assert pure.decode(frame) == test_wire_golden.MESSAGES[name]
    assert pure.encode(test_wire_golden.MESSAGES[name]).hex() == frame.hex()


@pytest.mark.parametrize("name", list(test_wire_golden.BODIES))
def test_a_task_body_is_the_recorded_frame_both_ways(pure: ModuleType, name: str) -> None:
    frame = test_wire_golden.golden()[name]
    assert pure.decode_body(frame) == test_wire_golden.BODIES[name]
    assert pure.encode_body(test_wire_golden.BODIES[name]).hex() == frame.hex()


@pytest.mark.parametrize("name", [*test_wire_golden.REQUESTS, *test_wire_golden.REPLIES])
def test_a_storage_header_is_the_recorded_frame_both_ways(pure: ModuleType, name: str) -> None:
    frame = test_wire_golden.golden()[name]
    if name in test_wire_golden.REQUESTS:
        assert pure.decode_storage_request(frame) == test_wire_golden.REQUESTS[name]
        assert pure.encode_storage_request(test_wire_golden.REQUESTS[name]).hex() == frame.hex()
    else:
        assert pure.decode_storage_reply(frame) == test_wire_golden.REPLIES[name]
        assert pure.encode_storage_reply(test_wire_golden.REPLIES[name]).hex() == frame.hex()


def _large_result(size: int) -> m.TaskResult:
    payload = random.Random(size).randbytes(size)
    return m.TaskResult(TaskID(b"t" * 16), m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, payload, worker_id=b"w")


@pytest.mark.parametrize("size", [9_000, 65_536, 3_000_000])
def test_a_message_of_several_segments_decodes(pure: ModuleType, size: int) -> None:
    """pycapnp puts what does not fit its first 8 KiB segment in another, behind a far pointer."""
    message = _large_result(size)
    frame = codec.encode(message)
    assert struct.unpack_from("<I", frame)[0] > 0, "pycapnp wrote one segment: this test checks nothing"
    assert pure.decode(frame) == message


@pytest.mark.parametrize("size", [9_000, 3_000_000])
def test_what_the_pure_builder_writes_past_a_segment_decodes_with_pycapnp(pure: ModuleType, size: int) -> None:
    message = _large_result(size)
    assert codec.decode(pure.encode(message)) == message


def test_a_batch_of_messages_splits_and_decodes(pure: ModuleType) -> None:
    messages = [m.Ping(7), _large_result(20_000), m.TaskCancel((TaskID(b"u" * 16),)), m.ClientDisconnect()]
    batch = b"".join(codec.encode(message) for message in messages)
    assert [pure.decode(part) for part in pure.split(batch)] == messages


def test_a_frame_claiming_a_huge_list_is_refused_at_once(pure: ModuleType) -> None:
    with pytest.raises(pure.DecodeError, match="traversal limit"):
        pure.decode(test_hostile_frames.amplification_frame())


@pytest.mark.timeout(120)
def test_mutated_frames_decode_or_raise_decode_error(pure: ModuleType) -> None:
    chance = random.Random(20261128)
    frames = [*test_hostile_frames.samples(), codec.encode(_large_result(10_000))]
    frames.append(codec.encode(m.Task(TaskID(b"t" * 16), ClientID(b"Client|x"), b"body", "f")))
    for frame in frames:
        for _ in range(400):
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
                pure.decode(bytes(mutated))
            except pure.DecodeError:
                pass
