"""The dashboard's story questions (`scaler.monitor.story_asker`): the query's task id, the JSON the page draws,
and the bounds: a silent scheduler is answered within the timeout, and past `MAX_QUESTIONS` open questions the next
is refused at once rather than opening one more connection."""

from __future__ import annotations

import pytest

from scaler.io.address import AddressError, free_tcp_port_block
from scaler.monitor.story_asker import (
    MAX_QUESTIONS,
    StoryAsker,
    StoryQueryError,
    StoryUnavailable,
    parse_task,
    scheduler_address_for,
    story_json,
)
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID


def test_the_task_parameter_is_a_task_id_in_hex() -> None:
    assert parse_task({"task": ["ab" * 16]}) == TaskID(b"\xab" * 16)
    for bad, words in [({}, "give the task id"), ({"task": ["xyz"]}, "not a task id in hex"),
                       ({"task": ["00" * 65]}, "1 to 64 bytes")]:  # fmt: skip
        with pytest.raises(StoryQueryError, match=words):
            parse_task(bad)


def test_the_scheduler_is_the_monitor_port_minus_two_unless_given() -> None:
    assert scheduler_address_for("tcp://127.0.0.1:8518") == "tcp://127.0.0.1:8516"
    assert scheduler_address_for("tcp://0.0.0.0:8518") == "tcp://127.0.0.1:8516"
    assert scheduler_address_for("tcp://127.0.0.1:8518", "tcp://10.0.0.1:9000") == "tcp://10.0.0.1:9000"


@pytest.mark.timeout(10)
def test_a_1_x_default_monitor_name_names_the_scheduler() -> None:
    assert scheduler_address_for("ipc:///tmp/127.0.0.1_2345_monitor") == "tcp://127.0.0.1:2345"
    assert scheduler_address_for("ipc:///tmp/0.0.0.0_8516_monitor") == "tcp://127.0.0.1:8516"


@pytest.mark.timeout(10)
@pytest.mark.parametrize("monitor", ["ipc:///tmp/scaler_monitor", "inproc://monitor", "tcp://127.0.0.1:2"])
def test_a_monitor_address_with_no_scheduler_in_it_says_how_to_give_one(monitor: str) -> None:
    with pytest.raises(AddressError, match=f"monitor address {monitor} .*give it with --scheduler-address"):
        scheduler_address_for(monitor)
    assert scheduler_address_for(monitor, "tcp://10.0.0.1:9000") == "tcp://10.0.0.1:9000"


def test_a_forgotten_task_is_said_forgotten_with_the_schedulers_note() -> None:
    answer = story_json(m.TaskStoryReply(TaskID(b"\x01" * 16), False, (), "the scheduler does not know this task"))
    assert answer["forgotten"] and not answer["known"] and answer["entries"] == []
    assert answer["note"] == "the scheduler does not know this task"


def test_a_silent_scheduler_is_answered_within_the_timeout() -> None:
    """Nothing listens at the address: the question ends as StoryUnavailable naming the timeout."""
    asker = StoryAsker(f"tcp://127.0.0.1:{free_tcp_port_block(1)}", timeout_seconds=0.2)
    with pytest.raises(StoryUnavailable, match=r"did not answer within 0\.2 s"):
        asker.ask(TaskID(b"\x01" * 16))


def test_questions_past_the_bound_are_refused_at_once() -> None:
    """Checked by switching it off: with `acquire(blocking=False)` replaced by `acquire()` this test hangs (the
    bound's slots are all taken) and fails on its timeout."""
    asker = StoryAsker("tcp://127.0.0.1:1", timeout_seconds=0.2)
    for _ in range(MAX_QUESTIONS):
        asker._open.acquire()
    with pytest.raises(StoryUnavailable, match=f"{MAX_QUESTIONS} story questions are open"):
        asker.ask(TaskID(b"\x01" * 16))
