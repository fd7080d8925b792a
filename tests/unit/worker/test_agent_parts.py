"""The parts AgentCore composes, each on its own: the result journal, the run-time estimates, the processor pool.
(Placement and the processor table are driven through AgentCore in test_agent_core.py, test_agent_staging.py and
test_processor_table.py.)"""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.worker.agent import estimates
from scaler.worker.agent.estimates import RunTimeEstimates
from scaler.worker.agent.pool import ProcessorPool
from scaler.worker.agent.processor_table import ProcessorState, ProcessorTable
from scaler.worker.agent.result_journal import ResultJournal


def result(number: int) -> m.TaskResult:
    return m.TaskResult(TaskID(number.to_bytes(16, "big")), m.ResultStatus.SUCCESS)


def numbers(journal: ResultJournal) -> list[int]:
    return [int.from_bytes(task_id, "big") for task_id in journal.task_ids()]


# ---------------------------------------------------------------- result journal


def test_the_journal_forgets_the_results_sent_before_the_heartbeat_the_scheduler_answered() -> None:
    journal = ResultJournal()
    journal.sent(result(1))
    journal.sent(result(2))
    journal.heartbeat_sent()
    journal.sent(result(3))
    journal.heartbeat_sent()  # a second one in flight: the first still marks
    journal.sent(result(4))
    assert numbers(journal) == [1, 2, 3, 4]
    journal.acknowledged()
    assert numbers(journal) == [3, 4] and len(journal) == 2
    journal.acknowledged()  # no heartbeat in flight since: nothing more is proven read
    assert numbers(journal) == [3, 4]
    assert [int.from_bytes(t, "big") for t in journal.task_ids()] == [3, 4]


def test_the_journal_keeps_the_newest_results_up_to_its_limit() -> None:
    journal = ResultJournal(limit=3)
    for number in range(5):
        journal.sent(result(number))
    assert numbers(journal) == [2, 3, 4]


def sent(number: int) -> m.ResultSent:
    """A processor's ResultSent for task `number`."""
    return m.ResultSent(TaskID(number.to_bytes(16, "big")), f"frame {number}".encode())


def ids(*numbers: int) -> tuple[TaskID, ...]:
    return tuple(TaskID(number.to_bytes(16, "big")) for number in numbers)


def test_a_result_a_processor_sent_is_kept_until_an_echo_names_it_not_by_the_echo_alone() -> None:
    """Rule 2: the processor's link is another connection, so an echo proves nothing about it unless it names it.
    (With the rule switched off, acknowledging like the agent's own results, result 1 would be forgotten by the
    first echo.)"""
    journal = ResultJournal()
    journal.sent_by_processor(b"p", sent(1))
    journal.sent_by_processor(b"p", sent(2))
    journal.heartbeat_sent()
    assert journal.acknowledged(ids(2)) == []
    assert numbers(journal) == [1]
    assert journal.acknowledged(ids(1, 7)) == []  # a name it does not hold is ignored
    assert len(journal) == 0


def test_a_result_unnamed_by_two_echoes_after_a_heartbeat_sent_since_it_was_heard_is_sent_again_by_the_agent() -> None:
    """Rule 3b: the first echo may answer a heartbeat that overtook the processor's message; the second cannot."""
    journal = ResultJournal()
    journal.sent_by_processor(b"p", sent(1))
    journal.heartbeat_sent()  # sent after result 1 was heard
    journal.sent_by_processor(b"p", sent(2))
    assert journal.acknowledged() == [], "one echo: its message may still be on its way"
    journal.heartbeat_sent()
    assert journal.acknowledged() == [sent(1)], "two echoes, the first after it was heard: sent again"
    assert numbers(journal) == [1, 2], "kept: result 1 as the agent's own now"
    journal.heartbeat_sent()  # result 1 went before it, on the agent's connection: this echo proves it read
    assert journal.acknowledged() == [sent(2)]
    assert numbers(journal) == [2]
    journal.heartbeat_sent()
    assert journal.acknowledged() == [] and len(journal) == 0


def test_a_processor_that_exits_has_its_unnamed_results_sent_again_and_only_its_own() -> None:
    """Rule 3a: its message may have died with it."""
    journal = ResultJournal()
    journal.sent_by_processor(b"p", sent(1))
    journal.sent_by_processor(b"q", sent(2))
    journal.sent_by_processor(b"p", sent(3))
    assert journal.processor_gone(b"p") == [sent(1), sent(3)]
    assert journal.processor_gone(b"p") == []
    assert numbers(journal) == [1, 3, 2]
    journal.heartbeat_sent()
    journal.acknowledged(ids(2))
    assert len(journal) == 0


def test_registering_again_sends_every_result_the_scheduler_may_not_have_read() -> None:
    """Rule 3c, for both kinds; the processors' become the agent's own."""
    journal = ResultJournal()
    journal.sent(result(1))
    journal.sent_by_processor(b"p", sent(2))
    assert journal.send_all_again() == [result(1), sent(2)]
    assert numbers(journal) == [1, 2]
    assert journal.send_all_again() == [result(1), sent(2)], "still kept until a heartbeat's echo"
    journal.heartbeat_sent()
    journal.acknowledged()
    assert len(journal) == 0


def test_the_journal_keeps_the_newest_results_of_processors_up_to_its_limit() -> None:
    journal = ResultJournal(limit=2)
    for number in range(4):
        journal.sent_by_processor(b"p", sent(number))
    assert numbers(journal) == [2, 3]


# ---------------------------------------------------------------- run-time estimates


def test_the_prefetch_is_one_task_until_one_finished_then_follows_the_average_run_time() -> None:
    runs = RunTimeEstimates()
    assert runs.prefetch() == 1
    runs.learn("f", 10.0)
    assert runs.prefetch() == 1, "one task ahead for long ones"
    tiny = RunTimeEstimates()
    tiny.learn("f", 0.0001)
    assert tiny.prefetch() == 50
    tinier = RunTimeEstimates()
    tinier.learn("f", 1e-9)
    assert tinier.prefetch() == estimates.MAX_PREFETCH


def test_the_prefetch_moves_only_when_the_run_time_moved_it_by_more_than_its_step() -> None:
    """A run time that varies from task to task does not change the capacity the scheduler is told with every task
    (each change is a WorkerCapacity message). Checked failing with the step at 1 (it followed every sample)."""
    runs = RunTimeEstimates()
    runs.learn("f", 0.0001)
    assert runs.prefetch() == 50
    for seconds in (0.00012, 0.00008, 0.00015, 0.00009):  # within a factor of 2 of it: no change
        runs.learn("f", seconds)
        assert runs.prefetch() == 50
    for _ in range(20):
        runs.learn("f", 0.001)  # ten times longer
    assert 5 <= runs.prefetch() <= 10, "within its step of the 5 tasks that hold 5 ms"


def test_staging_depth_is_learned_per_function_and_none_for_one_not_seen_finishing() -> None:
    runs = RunTimeEstimates()
    runs.learn("tiny", 0.0001)
    runs.learn("slow", 0.5)
    assert runs.staging_depth("tiny", 16) == 16
    assert runs.staging_depth("tiny", 4) == 4
    assert runs.staging_depth("slow", 16) == 0
    assert runs.staging_depth("unseen", 16) == 0


def test_the_known_functions_are_forgotten_when_a_new_one_would_pass_the_limit() -> None:
    runs = RunTimeEstimates()
    for number in range(estimates.MAX_KNOWN_FUNCTIONS):
        runs.learn(f"f{number}", 0.0001)
    assert runs.staging_depth("f0", 16) == 16
    runs.learn("one more", 0.0001)
    assert runs.staging_depth("f0", 16) == 0 and runs.staging_depth("one more", 16) == 16


# ---------------------------------------------------------------- processor pool


def table_with(*states: ProcessorState) -> ProcessorTable:
    table = ProcessorTable("thread")
    for number, state in enumerate(states):
        table.set_state(table.add(f"p-{number}".encode()), state)
    return table


def test_the_pool_keeps_one_ready_processor_per_slot_that_could_start_a_task() -> None:
    pool = ProcessorPool(slots=3, prefix=b"w")
    assert pool.to_start(table_with(), queued=0) == 1, "one while a slot is free"
    assert pool.to_start(table_with(), queued=5) == 3
    assert pool.to_start(table_with(ProcessorState.STARTING), queued=5) == 2
    assert pool.to_start(table_with(*[ProcessorState.RUNNING] * 3), queued=5) == 0, "no spare while all compute"


def test_the_pool_retires_idle_processors_beyond_one_of_slack() -> None:
    pool = ProcessorPool(slots=4, prefix=b"w")
    table = table_with(*[ProcessorState.IDLE] * 4)
    assert pool.to_retire(table, queued=0) == (b"p-0", b"p-1"), "the oldest go first"
    assert pool.to_retire(table, queued=4) == ()


def test_the_pool_names_processors_and_counts_start_failures_in_a_row() -> None:
    pool = ProcessorPool(slots=1, prefix=b"w")
    assert [pool.new_id(), pool.new_id()] == [b"w-0", b"w-1"]
    assert pool.failed_to_start() == 1 and pool.failed_to_start() == 2
    pool.started()
    assert pool.failed_to_start() == 1
