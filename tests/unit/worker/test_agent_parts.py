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
    return [int.from_bytes(r.task_id, "big") for r in journal.unacknowledged()]


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
