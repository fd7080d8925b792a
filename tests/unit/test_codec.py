"""Every message survives a round trip through the codec, and bad frames are refused clearly."""

import logging
from dataclasses import replace

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol import storage_messages as sm
from scaler.protocol.ids import ClientID, GraphID, ObjectID, TaskID

T = TaskID(b"t" * 16)
C = ClientID(b"Client|abc")
TASK = m.Task(
    T,
    C,
    b"body",
    "f",
    2,
    (("gpu", -1),),
    GraphID(b"g"),
    (TaskID(b"d" * 16),),
    (m.TaskInput(TaskID(b"d" * 16), m.PayloadKind.INLINE, b"v"), m.TaskInput(T, m.PayloadKind.OBJECT_ID, b"o")),
)
STATUS = m.WorkerStatus(1, 2, 3, 4, (m.ProcessorStatus(10, 1.5, 100, "running"),))

SAMPLES: list[m.Message] = [
    m.Hello(1, "3.11.7", 42, "host", m.ClientInfo("me")),
    m.Hello(1, "3.11.7", 42, "host", m.ClientInfo("capped", 2.0, 10, 3)),
    m.Hello(1, "3.11.7", 42, "host", m.ClientInfo("laptop", resume_seconds=600.0)),
    m.Hello(1, "3.11.7", 42, "host", m.WorkerInfo((("cpu", 8), ("linux", -1)), 3, "mgr", "FIX")),
    m.Hello(1, "3.11.7", 42, "host", m.ManagerInfo("mgr", (), None, "baremetal_native")),
    m.Hello(1, "3.11.7", 42, "host", m.ManagerInfo("mgr", (("gpu", 1),), 8, "aws_raw_ecs")),
    m.Hello(1, "3.11.7", 42, "host", m.ManagerInfo("spot", (), 40, "orb_aws_ec2", 0.05, 60.0)),
    m.Hello(1, "3.11.7", 42, "host", m.ManagerInfo("free", (), None, "baremetal_native", 0.0, 0.0)),
    m.Hello(1, "3.11.7", 42, "host", m.ProcessorInfo(b"p1", b"Worker|FIX|w1")),
    m.HelloReply(False, "no", 1, "3.12.0", "tcp://127.0.0.1:1", 1.5, 3),
    m.HelloReply(True, "", 1, "3.12.0", "tcp://127.0.0.1:1", 2.0, 1, b"instance", 1800.0),
    m.Heartbeat(1.0, 2, STATUS, None),
    m.Heartbeat(1.0, 2, None, m.ManagerStatus(3, 1)),
    m.Heartbeat(1.0, 2, None, m.ManagerStatus(3, 1, 42.5)),
    m.Heartbeat(0.0, 0),
    m.Heartbeat(0.0, 0, round_trip_seconds=0.5, answers_epoch=2, answers_received=10_000),
    m.HeartbeatEcho("tcp://x:1", 2),
    m.HeartbeatEcho("tcp://x:1", 2, (T, TaskID(b"u" * 16))),
    m.Ping(7),
    m.ProtocolError("bad", m.ProtocolErrorKind.UNKNOWN_PEER),
    TASK,
    m.TaskResult(T, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v", "", m.Profile(1.0, 0.5, 99), b"w"),
    m.TaskResult(T, m.ResultStatus.FAILED, m.PayloadKind.OBJECT_ID, b"o", "boom"),
    m.TaskResult(T, m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, b"o", stored_bytes=300_000),
    m.TaskResult(T, m.ResultStatus.WORKER_DIED, error_message="gone"),
    m.TaskResult(
        T, m.ResultStatus.SUCCESS, worker_id=b"w", ran=m.RunStamps(1700000000.25, 1700000001.5, 4242, 1700000000.125)
    ),
    m.TaskCancel((T, TaskID(b"u" * 16))),
    m.TaskCancelConfirm(T, m.CancelOutcome.NOT_FOUND),
    m.TaskLog(T, m.LogStream.STDERR, "hello\n"),
    m.GraphTask(GraphID(b"g"), C, (TASK, TASK), (T,)),
    m.ClientDisconnect(True),
    m.ShutdownReply(False, "protected"),
    m.TaskStoryRequest(T),
    m.TaskStoryReply(T, True, (m.StoryEntry(1700000000.5, "scheduler", "", "queued", "submitted by client c"),), ""),
    m.TaskStoryReply(T, False, (), "forgotten"),
    m.JobOpen("nightly", (b"t" * 16, b"u" * 16)),
    m.JobAttach("nightly"),
    m.JobReply("nightly", True, "", (b"t" * 16,), "running", b"Client|x"),
    m.ClientResume(1, 42, (TaskID(b"t" * 16), TaskID(b"u" * 16))),
    m.ClientResume(0, 0),
    m.ClientResumed(2, (TaskID(b"u" * 16),)),
    m.ClientResumed(1, (), (TaskID(b"c" * 16), TaskID(b"d" * 16))),
    m.WorkerCapacity(4),
    m.WorkerLeaving("sigterm"),
    m.TaskReturn((T,)),
    m.Shutdown("bye"),
    m.ManagerTarget((m.TargetEntry((), 3), m.TargetEntry((("gpu", -1),), 1)), ("w1",)),
    m.UnitsReclaimed(("3f2a9c1b0d4e", "unit2"), 120.0),
    m.ProcessorReady(5),
    m.ProcessorBlocked(T),
    m.ProcessorResumeRequest(T),
    m.ProcessorResume(T),
    m.ResultSent(T, b"a TaskResult frame"),
    m.ProcessorExited(b"p1", "killed by SIGSEGV"),
    m.ProcessorWriting(True),
    m.StatusSnapshot(
        1.0,
        m.SchedulerStats("tcp://a:1", 1.0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14),
        (m.WorkerSummary(b"w", "mgr", (("a", -1),), 2, 1, STATUS, 1.0, 5, 0.5, "h", 9),),
        (m.ClientSummary(b"c", 3),),
        (
            m.ManagerSummary("mgr", "baremetal_native", (), 4, 1, 2, 3, 4),
            m.ManagerSummary("spot", "orb_aws_ec2", (), 40, 3, 5, 5, 2, None, 1.5, 0.05, 61.0),
        ),
        (m.PendingGroup((("gpu", -1),), 3, "no worker has gpu"),),
    ),
    m.StatusSnapshot(
        2.0,
        m.SchedulerStats(),
        (m.WorkerSummary(b"w", "mgr", (), 2, 1, STATUS, 1.0, 5, 0.5, "h", 9, 0.25, "NAT-u1", 30.0),),
        (
            m.ClientSummary(b"c", 3, "notebook", "laptop", m.TaskCounts(1, 2, 3, 4, 5, 6)),
            m.ClientSummary(b"d", 1, away_seconds=12.5, resume_seconds=1800.0),
        ),
        (
            m.ManagerSummary(
                "mgr", "aws_raw_ecs", (), None, 1, 2, 3, 4, m.ManagerTarget((m.TargetEntry((), 8),), ("w1",)), 1.5
            ),
        ),
        (m.PendingGroup((), 3, "all workers are busy", 5, 2.5),),
        wall_time=1.7e9,
        functions=(m.FunctionSummary("inc", m.TaskCounts(queued=7, succeeded=3)),),
        message_counts=(m.MessageCount("Task", 10, 20),),
        jobs=(m.JobSummary("nightly", "running", 12, 50, True, 2, "risk-desk", "rq:Y<7Ib%2", 95.5),),
    ),
    m.TaskTransitions(
        (
            m.TaskTransition(T, "running", b"w", "inc", 1.7e9),
            m.TaskTransition(T, "success", b"w", "inc", 1.7e9, 0.5, 4096, b"Client|a|1"),
        ),
        dropped=3,
        wall_time=1.7e9,
    ),
    m.ScalingDecisions((m.ScalingDecision("ecs-1", 3, 8, "412 tasks queued, work policy", 1.7e9),), 1.7e9),
    m.StreamItem(T, 3, m.PayloadKind.INLINE, b"value"),
    m.StreamCredit(T, 32),
    m.ActorReady(T),
    m.ProcessorKill(b"p1", "its task timed out"),
    m.ProcessorsWanted(2),
    m.ActorStop(T),
    m.ActorLookup("pricer"),
    m.ActorReply("pricer", True, T, "Pricer", b"interface"),
    m.Task(T, b"c", b"body", "Pricer", actor=m.ActorSpec(-1, 4, "pricer", b"interface")),
    m.Task(T, b"c", b"body", "Pricer.price", stream_credit=8, actor_id=T),
]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda s: type(s).__name__)
def test_round_trip(message: m.Message) -> None:
    assert codec.decode(codec.encode(message)) == message


def test_every_message_type_has_a_sample() -> None:
    assert {type(s) for s in SAMPLES} == set(m.MESSAGE_TYPES)


def test_body_round_trip() -> None:
    body = m.TaskBody(
        ObjectID(b"f"),
        (
            m.Argument(m.ArgumentKind.INLINE, b"1"),
            m.Argument(m.ArgumentKind.OBJECT_ID, b"o", "x"),
            m.Argument(m.ArgumentKind.TASK_RESULT, b"t", "y"),
        ),
        ObjectID(b"s"),
        True,
        True,
    )
    assert codec.decode_body(codec.encode_body(body)) == body
    forwarding = replace(body, log_forwarding=m.LogForwarding(logging.INFO, "user.tasks"))
    assert codec.decode_body(codec.encode_body(forwarding)) == forwarding
    everything = replace(body, log_forwarding=m.LogForwarding())  # NOTSET, every logger: still on
    assert codec.decode_body(codec.encode_body(everything)).log_forwarding == m.LogForwarding(0, "")


@pytest.mark.parametrize("frame", [b"", b"\x00" * 7, b"garbage!" * 3, b"\xff" * 64])
def test_garbage_is_refused_with_a_decode_error(frame: bytes) -> None:
    with pytest.raises(codec.DecodeError, match="not a valid"):
        codec.decode(frame)


STORAGE_REQUESTS = [
    sm.StorageHello(1, "3.11.7", "client"),
    sm.Put(ObjectID(b"o"), b"owner", 10, "name"),
    sm.Get(ObjectID(b"o")),
    sm.Delete((ObjectID(b"a"), ObjectID(b"b"))),
    sm.Exists(ObjectID(b"o")),
    sm.Info(),
    sm.DeleteOwner(b"owner"),
]


@pytest.mark.parametrize("operation", STORAGE_REQUESTS, ids=lambda s: type(s).__name__)
def test_storage_request_round_trip(operation: sm.StorageOperation) -> None:
    request = sm.StorageRequest(7, operation)
    assert codec.decode_storage_request(codec.encode_storage_request(request)) == request


@pytest.mark.parametrize(
    "value", [None, sm.ObjectSize(5), True, False, sm.StorageInfo(1, 2, 3), 4], ids=lambda v: repr(v)
)
def test_storage_reply_round_trip(value: sm.ReplyValue) -> None:
    reply = sm.StorageReply(3, sm.StorageStatus.NOT_FOUND, "why", value)
    assert codec.decode_storage_reply(codec.encode_storage_reply(reply)) == reply


def test_decoding_many_messages_leaves_no_allocation_behind() -> None:
    """The name of the message kind given to getattr is interned: a fresh string each time would stay in CPython's
    type attribute cache (hundreds of them after a big queue, each keeping a memory arena of its tasks alive)."""
    import gc
    import tracemalloc

    frames = [codec.encode(TASK), codec.encode(m.TaskResult(T, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v"))]
    tracemalloc.start()
    try:
        # warm-up, traced: what the codec keeps once (a client id, a function name; Python 3.10's per-function
        # opcode caches, made after about 1,000 calls) is in both snapshots; only what piles up is a difference
        for _ in range(2_000):
            for frame in frames:
                codec.decode(frame, forwarding=True)
        gc.collect()
        before = tracemalloc.take_snapshot()
        for _ in range(1_000):
            for frame in frames:
                codec.decode(frame, forwarding=True)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    only_codec = [tracemalloc.Filter(True, codec.__file__)]
    left = after.filter_traces(only_codec).compare_to(before.filter_traces(only_codec), "lineno")
    assert [stat for stat in left if stat.count_diff > 0] == []
