"""A Task and its TaskBody written directly (protocol/task_frames.py) are byte for byte what the generated codec writes
through pycapnp, for every value of the shape they write (random ones: ids and blobs of every length modulo a word,
empty ones, keywords, copy-on-write, every argument kind, negative priorities, the largest counts), and decode to the
value written; a value of another shape is left to the generated codec.

Checked by hand with the mechanism off (`body_frame` and `task_frame` returning None): the first two tests fail on
their "written directly" assertions.
"""

from __future__ import annotations

import random

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, GraphID, ObjectID, TaskID
from scaler.protocol.task_frames import body_frame, task_frame

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
