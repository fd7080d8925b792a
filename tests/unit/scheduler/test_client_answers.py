"""The answer log of one client (scheduler/core/client_answers.py), rule by rule."""

from __future__ import annotations

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import ObjectID, TaskID
from scaler.scheduler.core import client_answers
from scaler.scheduler.core.client_answers import AnswerLog, answer_bytes


def result(number: int, size: int = 10) -> m.TaskResult:
    return m.TaskResult(TaskID(number.to_bytes(16, "big")), m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"x" * size)


def ids(answers: list[m.TaskResult | m.TaskCancelConfirm]) -> list[int]:
    return [int.from_bytes(answer.task_id, "big") for answer in answers]


def test_a_count_of_the_current_epoch_forgets_that_many_of_the_oldest_answers() -> None:
    log = AnswerLog()
    for number in range(5):
        log.sent_one(result(number))
    log.acknowledge(0, 3)
    assert ids(list(log.sent)) == [3, 4] and log.acknowledged == 3
    log.acknowledge(0, 2)  # an older heartbeat, read late: nothing more
    log.acknowledge(1, 5)  # another epoch's count: nothing
    assert ids(list(log.sent)) == [3, 4]
    assert log.has_answer_for(result(3).task_id) and not log.has_answer_for(result(0).task_id)


def test_a_resume_sends_again_what_came_after_the_count_then_what_was_held() -> None:
    log = AnswerLog()
    for number in range(4):
        log.sent_one(result(number))
    log.acknowledge(0, 1)
    log.hold(result(9))
    again = log.resume(0, 2)  # it had 0 and 1; 2 and 3 were lost with the connection
    assert ids(again) == [2, 3, 9] and log.epoch == 1 and log.acknowledged == 0 and not log.held
    assert log.resume(0, 50) == again, "a stale epoch's count: all of the current epoch again"
    log.acknowledge(2, 3)
    assert not log.sent and not log.answered()


def test_held_answers_become_a_bundle_that_keeps_only_their_ids_once_written() -> None:
    log = AnswerLog()
    for number in range(3):
        log.hold(result(number, size=100))
    assert log.held_bytes == 3 * answer_bytes(result(0, size=100))
    answers = log.take_bundle(ObjectID(b"bundle"))
    assert ids(list(answers)) == [0, 1, 2] and not log.held and log.held_bytes == 0
    assert log.stored(ObjectID(b"bundle"), True) and log.bundles[0].answers is None
    assert log.answered() == {result(n).task_id for n in range(3)} and log.waiting_count == 3
    (bundle,) = log.loadable(now=0.0)
    assert not log.loadable(now=0.0), "a bundle being read is not read twice"
    log.load_failed(bundle.object_id, retry_at=5.0)
    assert not log.loadable(now=4.0) and log.loadable(now=5.0)
    assert ids(log.loaded(bundle.object_id, answers, present=True)) == [0, 1, 2]
    assert not log.bundles and ids(list(log.sent)) == [0, 1, 2]


def test_a_bundle_still_being_written_is_sent_from_memory_and_its_object_is_not_kept() -> None:
    log = AnswerLog()
    log.hold(result(1))
    log.take_bundle(ObjectID(b"b"))
    assert ids(log.release_written()) == [1]
    assert not log.stored(ObjectID(b"b"), True), "written after its answers left: the core deletes it"


def test_a_bundle_that_could_not_be_written_is_held_again_and_nothing_more_is_written() -> None:
    log = AnswerLog()
    log.hold(result(1))
    log.take_bundle(ObjectID(b"b"))
    assert not log.stored(ObjectID(b"b"), False)
    assert ids(log.held) == [1] and not log.may_spill and not log.bundles


def test_a_client_that_never_acknowledges_costs_a_bounded_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_answers, "MAX_UNACKNOWLEDGED", 4)
    log = AnswerLog()
    for number in range(10):
        log.sent_one(result(number))
    assert ids(list(log.sent)) == [6, 7, 8, 9] and log.acknowledged == 6
    assert len(log.answered()) == 4
