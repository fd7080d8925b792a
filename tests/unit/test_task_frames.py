"""A Task and its TaskBody written directly (protocol/task_frames.py) are byte for byte what the generated codec writes
through pycapnp, for every value of the shape they write (random ones: ids and blobs of every length modulo a word,
empty ones, keywords, copy-on-write, every argument kind, negative priorities, the largest counts), and decode to the
value written; a value of another shape is left to the generated codec. A frame of the common shape is read back
without pycapnp (`read_task_frame`) as pycapnp reads it, and any other frame (another shape, a word changed, a byte
more or less) is left to pycapnp or read as pycapnp reads it.

Checked by hand with the mechanism off (`body_frame`, `task_frame` and `read_task_frame` returning None): the first
two tests fail on their "written directly" assertions, the reading test on its "read without pycapnp" one.
"""

from __future__ import annotations

import random

from scaler.protocol import codec, codec_structs
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, GraphID, ObjectID, TaskID
from scaler.protocol.task_frames import body_frame, read_task_frame, task_frame
from tests.unit.frame_mutations import mutated

KINDS = (m.ArgumentKind.INLINE, m.ArgumentKind.OBJECT_ID, m.ArgumentKind.TASK_RESULT)


def _blob(rng: random.Random) -> bytes:
    return rng.randbytes(rng.choice([0, 1, 7, 8, 9, 16, 100, rng.randint(0, 300)]))


def _by_pycapnp_body(body: m.TaskBody) -> bytes:
    return codec._encode(codec._schema.TaskBody, codec.cs.write_task_body, body)


def _by_pycapnp_task(task: m.Task) -> bytes:
    name, write = codec.cs.WRITERS[m.Task]
    envelope = codec._schema.Message.new_message()
    write(envelope.init(name), task)
    return bytes(envelope.to_bytes())


def _read_by_pycapnp(frame: bytes) -> m.Task | None:
    """The Task pycapnp reads from a frame (None: it refuses the frame, or the frame holds another message)."""
    try:
        for envelope in codec._schema.Message.read_multiple_bytes(frame):
            return codec_structs.read_task(envelope.task) if envelope._which_str() == "task" else None
    except Exception:
        return None
    return None


def _random_common_task(rng: random.Random) -> m.Task:
    return m.Task(
        TaskID(rng.randbytes(rng.choice([0, 3, 16]))), ClientID(rng.randbytes(rng.choice([0, 16, 41]))),
        _by_pycapnp_body(_random_body(rng)), rng.choice(["", "inc", "função", "a" * 8]),
        rng.choice([0, 1, -1, -(2**31), 2**31 - 1]), stream_credit=rng.choice([0, 5, 2**32 - 1]),
    )  # fmt: skip


def _random_body(rng: random.Random) -> m.TaskBody:
    keywords = ["", "k", "keyword_é", "x" * 8, "y" * 7]
    args = tuple(
        m.Argument(rng.choice(KINDS), _blob(rng), rng.choice(keywords), rng.random() < 0.3)
        for _ in range(rng.choice([0, 1, 2, 3, 5]))
    )
    return m.TaskBody(
        ObjectID(rng.randbytes(rng.choice([0, 16]))), args, ObjectID(rng.randbytes(rng.choice([0, 3, 16]))),
        rng.random() < 0.5, rng.random() < 0.5, rng.choice([0, 1, 2**32 - 1]),
    )  # fmt: skip


def test_a_body_written_directly_is_what_pycapnp_writes() -> None:
    rng = random.Random(40)
    for _ in range(1500):
        body = _random_body(rng)
        frame = body_frame(body)
        assert frame is not None, "a body of the common shape is written directly"
        assert frame == _by_pycapnp_body(body), body
        assert codec.decode_body(frame) == body


def test_a_task_written_directly_is_what_pycapnp_writes() -> None:
    rng = random.Random(41)
    for _ in range(1500):
        body = _by_pycapnp_body(_random_body(rng))
        task = m.Task(
            TaskID(rng.randbytes(rng.choice([0, 16]))), ClientID(rng.randbytes(rng.choice([0, 16]))), body,
            rng.choice(["", "inc", "função", "a" * 8]), rng.choice([0, 1, -1, -(2**31), 2**31 - 1]),
            stream_credit=rng.choice([0, 5, 2**32 - 1]), actor_id=TaskID(rng.randbytes(rng.choice([0, 0, 16]))),
            large_inputs=tuple(ObjectID(rng.randbytes(rng.choice([16, 20]))) for _ in range(rng.choice([0, 0, 1, 4]))),
        )  # fmt: skip
        frame = task_frame(task)
        assert frame is not None, "a task of the common shape is written directly"
        assert frame == _by_pycapnp_task(task), task
        assert codec.encode(task) == frame
        decoded = codec.decode(frame)
        assert isinstance(decoded, m.Task) and decoded == task


def test_other_shapes_are_left_to_the_generated_codec() -> None:
    body = m.TaskBody(ObjectID(b"f" * 16), (), log_forwarding=m.LogForwarding(20, "app"))
    assert body_frame(body) is None
    assert codec.decode_body(codec.encode_body(body)) == body
    encoded = codec.encode_body(m.TaskBody(ObjectID(b"f" * 16)))
    for task in (
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, capabilities=(("gpu", 1),)),
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, graph_id=GraphID(b"g" * 16)),
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, dependencies=(TaskID(b"d" * 16),)),
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, actor=m.ActorSpec(name="counter")),
    ):
        assert task_frame(task) is None
        assert codec.decode(codec.encode(task)) == task


def test_a_common_task_is_read_without_pycapnp_as_pycapnp_reads_it() -> None:
    rng = random.Random(42)
    for _ in range(1500):
        task = _random_common_task(rng)
        frame = _by_pycapnp_task(task)
        read = read_task_frame(frame)
        assert read is not None, "a task of the common shape is read without pycapnp"
        assert read == task == _read_by_pycapnp(frame)
        for forwarding in (True, False):  # the Task keeps its frame either way (the scheduler: while its step lasts)
            decoded = codec.decode(frame, forwarding=forwarding)
            assert isinstance(decoded, m.Task) and decoded == task and decoded.wire == frame


def test_any_other_frame_is_left_to_pycapnp_or_read_as_it_reads_it() -> None:
    encoded = codec.encode_body(m.TaskBody(ObjectID(b"f" * 16)))
    for task in (
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, capabilities=(("gpu", 1),)),
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, graph_id=GraphID(b"g" * 16)),
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, actor_id=TaskID(b"a" * 16)),
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, large_inputs=(ObjectID(b"o" * 16),)),
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, actor=m.ActorSpec(name="counter")),
        m.Task(TaskID(b"t" * 16), ClientID(b"c" * 16), encoded, result_id=ObjectID(b"r" * 16)),
    ):
        frame = _by_pycapnp_task(task)
        assert read_task_frame(frame) is None
        assert codec.decode(frame) == task
    rng = random.Random(43)
    for _ in range(40):
        frame = _by_pycapnp_task(_random_common_task(rng))
        for other in mutated(frame, rng):
            read = read_task_frame(other)
            assert read is None or read == _read_by_pycapnp(other), other.hex()
