"""A TaskResult's frame read without pycapnp (protocol/result_frames.py) gives what the generated reader gives, for
results of every shape (each status and payload kind, empty and unicode error messages, a profile or none, run stamps
or none, the largest counts), and keeps its frame; a frame it does not take (another message, a word changed, a byte
more or less) is left to the generated reader, or read as it reads it.

Checked by hand with the mechanism off (`read_result_frame` returning None): the first test fails on its "read
without pycapnp" assertion.
"""

from __future__ import annotations

import random

from scaler.protocol import codec, codec_structs
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.result_frames import read_result_frame
from tests.unit.frame_mutations import mutated


def _by_pycapnp(result: m.TaskResult) -> bytes:
    name, write = codec_structs.WRITERS[m.TaskResult]
    envelope = codec._schema.Message.new_message()
    write(envelope.init(name), result)
    return bytes(envelope.to_bytes())


def _read_by_pycapnp(frame: bytes) -> m.TaskResult | None:
    """The TaskResult pycapnp reads from a frame (None: it refuses the frame, or the frame holds another message)."""
    try:
        for envelope in codec._schema.Message.read_multiple_bytes(frame):
            if envelope._which_str() != "taskResult":
                return None
            return codec_structs.read_task_result(envelope.taskResult)
    except Exception:
        return None
    return None


def _random_result(rng: random.Random) -> m.TaskResult:
    kind = rng.choice(list(m.PayloadKind))
    payload = b"" if kind is m.PayloadKind.NONE else rng.randbytes(rng.choice([0, 1, 5, 8, 16, 300]))
    profile = rng.choice([m.Profile(), m.Profile(rng.random(), rng.random(), rng.choice([0, 1, 2**64 - 1]))])
    stamps = m.RunStamps(rng.random() * 1e9, rng.random() * 1e9, rng.choice([0, 3583, 2**32 - 1]), rng.random())
    return m.TaskResult(
        TaskID(rng.randbytes(rng.choice([0, 16]))), rng.choice(list(m.ResultStatus)), kind, payload,
        rng.choice(["", "boom", "ошибка: é", "x" * 8]), profile, rng.choice([b"", b"Worker|FIX|0", rng.randbytes(9)]),
        rng.choice([None, stamps]), rng.choice([0, 1, 2**64 - 1]), rng.choice([0, 7, 2**64 - 1]),
    )  # fmt: skip


def test_a_result_is_read_without_pycapnp_as_pycapnp_reads_it() -> None:
    rng = random.Random(50)
    for _ in range(1500):
        result = _random_result(rng)
        frame = _by_pycapnp(result)
        read = read_result_frame(frame)
        assert read is not None, "a result is read without pycapnp"
        assert read == result == _read_by_pycapnp(frame)
        assert read.wire == frame, "it keeps its frame, forwarded unchanged"
        decoded = codec.decode(frame, forwarding=True)
        assert isinstance(decoded, m.TaskResult) and decoded == result and decoded.wire == frame


def test_any_other_frame_is_left_to_pycapnp_or_read_as_it_reads_it() -> None:
    assert read_result_frame(codec.encode(m.Ping())) is None
    assert read_result_frame(codec.encode(m.TaskCancel((TaskID(b"t" * 16),)))) is None
    rng = random.Random(51)
    for _ in range(40):
        frame = _by_pycapnp(_random_result(rng))
        for other in mutated(frame, rng):
            read = read_result_frame(other)
            assert read is None or read == _read_by_pycapnp(other), other.hex()
