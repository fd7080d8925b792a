"""The monitor feed's wire format: every value survives a round trip; other versions and bad frames are
refused with a clear message."""

from __future__ import annotations

import pytest

from scaler.protocol import feed as f
from scaler.protocol import feed_codec
from scaler.protocol import messages as m

VIEW = f.SchedulerView(
    now=12.5,
    wall_time=1_700_000_000.25,
    scheduler=f.SchedulerStats("tcp://127.0.0.1:8516", 12.5, 1 << 30, 3, 4096, (("Task", 7),), (("TaskResult", 6),), 2),
    tasks=f.TaskCounts(1, 2, 3, 4, 5, 6, 7, 8, 9),
    groups=(f.TaskGroupEntry((("gpu", 1),), 4, 1, 2.5, "no connected worker has the capabilities gpu"),),
    workers=(
        f.WorkerEntry(
            b"Worker|FIX|ab",
            "host",
            42,
            "native",
            (("linux", -1),),
            2,
            1,
            m.WorkerStatus(1, 1, 0, 1 << 33, (m.ProcessorStatus(43, 50.0, 1 << 20, "running"),)),
            1.5,
            1 << 25,
            0.25,
            0.5,
            60.0,
        ),
    ),  # fmt: skip
    managers=(
        f.ManagerEntry("native", "baremetal_native", (), None, None, 0, 0, 0, 1.0),
        f.ManagerEntry("ecs", "aws_raw_ecs", (("gpu", -1),), 8, (m.TargetEntry((("gpu", -1),), 3),), 3, 2, 1, 0.5),
        f.ManagerEntry("empty", "x", (), 0, (), 0, 0, 0, 0.0),
    ),
    clients=(f.ClientEntry(b"Client|c", "me", "laptop", 7, f.TaskCounts(success=3)),),
    functions=(f.FunctionEntry("inc", f.TaskCounts(queued=1)),),
    decisions=(f.ScalingDecision(1_700_000_000.0, "ecs", "work", 1, 3, "3 tasks"),),
    manager_timeout_seconds=10.0,
)
BODIES: list[f.FeedBody] = [
    VIEW,
    f.SchedulerView(0.0, 0.0),
    f.TransitionBatch(
        tuple(
            f.TaskTransition(bytes([n]) * 16, status, b"Worker|x" if n % 2 else b"", 1.5 + n)
            for n, status in enumerate(f.TaskStatus)
        ),
        dropped=12,
    ),  # fmt: skip
    f.TransitionBatch(),
    f.ScalingDecision(1.0, "m", "vanilla", 0, 1, ""),
]


@pytest.mark.parametrize("body", BODIES, ids=lambda body: type(body).__name__)
def test_round_trip(body: f.FeedBody) -> None:
    message = f.FeedMessage(f.FEED_VERSION, 1_700_000_001.0, body)
    frames = feed_codec.encode(message)
    assert frames[0] == message.topic.value.encode()
    assert feed_codec.decode(frames) == message


def test_every_topic_has_a_body_type() -> None:
    assert set(f.TOPIC_OF_BODY.values()) == set(f.FeedTopic)


def test_another_feed_version_is_refused_naming_both_versions_and_the_reader() -> None:
    frames = feed_codec.encode(f.FeedMessage(f.FEED_VERSION + 1, 1.0, VIEW))
    with pytest.raises(feed_codec.FeedVersionError) as refused:
        feed_codec.decode(frames, reader="scaler_top")
    assert str(refused.value) == (
        f"monitor feed version {f.FEED_VERSION + 1}, scaler_top reads version {f.FEED_VERSION}: install the same "
        "scaler version as the scheduler"
    )


def test_the_version_is_readable_from_any_future_schema() -> None:
    """A later version may change everything but field @0: a reader of this version still finds it."""
    root = feed_codec._schema.FeedMessage.new_message()
    root.version = 7
    with pytest.raises(feed_codec.FeedVersionError, match="version 7"):
        feed_codec.decode([b"status", root.to_bytes() + b"\0" * 64])


@pytest.mark.parametrize(
    "frames, words",
    [
        ([b"status"], "2 frames"),
        ([b"gossip", b"x" * 16], "unknown monitor feed topic"),
        ([b"status", b"garbage!" * 3], "not a valid monitor feed message"),
        ([b"decisions", feed_codec.encode(f.FeedMessage(f.FEED_VERSION, 1.0, VIEW))[1]], "on the decisions topic"),
    ],
)
def test_bad_frames_are_refused_clearly(frames: list[bytes], words: str) -> None:
    with pytest.raises(feed_codec.FeedDecodeError, match=words):
        feed_codec.decode(frames)
