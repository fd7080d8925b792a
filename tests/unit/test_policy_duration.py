"""Duration-aware `work` targets (issue #17): outstanding work in seconds, and `target_finish_seconds`."""

from __future__ import annotations

import pytest

from scaler.policy.content import parse_simple_content
from scaler.policy.decision import ScalingMemory
from scaler.policy.outstanding_work import RunTimeTable, outrun_mean, outstanding_seconds
from scaler.policy.registry import make_policy
from scaler.policy.scaling import WorkScaling
from scaler.policy.snapshot import FunctionTasks, ManagerView, RunTime, ScalingSnapshot, TaskGroup, scaling_snapshot
from scaler.protocol import messages as m
from scaler.protocol.messages import WorkerLimit

GPU = (("gpu", -1),)


def table(*run_times: RunTime) -> RunTimeTable:
    return RunTimeTable.of(run_times)


def group(*functions: FunctionTasks, capabilities: m.Capabilities = ()) -> TaskGroup:
    queued = sum(function.queued for function in functions)
    running = sum(len(function.running_seconds) for function in functions)
    return TaskGroup(capabilities, queued, running, functions=functions)


def snapshot(
    *groups: TaskGroup,
    run_times: tuple[RunTime, ...] = (),
    max_workers: WorkerLimit = None,
    capabilities: m.Capabilities = (),
) -> ScalingSnapshot:
    manager = ManagerView("m", capabilities, max_workers)
    return ScalingSnapshot(now=0.0, task_groups=groups, managers=(manager,), run_times=run_times)


def workers_wanted(policy: WorkScaling, view: ScalingSnapshot) -> int:
    step = policy.decide(view, ScalingMemory())
    return sum(entry.workers for entry in step.decision["m"].entries)


def reason(policy: WorkScaling, view: ScalingSnapshot) -> str:
    return policy.decide(view, ScalingMemory()).reasons["m"]


# ---------------------------------------------------------------- outstanding work


def test_queued_tasks_count_their_mean_and_running_ones_what_is_left_of_it() -> None:
    work = group(FunctionTasks("f", queued=3, running_seconds=(1.0, 4.0, 9.0)))
    # 3 x 5 s queued; running: 4 s + 1 s + 0 s (the third has outrun its mean)
    assert outstanding_seconds([work], table(RunTime("f", (), 5.0))) == pytest.approx(20.0)


def test_a_function_never_seen_counts_the_mean_of_every_learned_run_time() -> None:
    work = group(FunctionTasks("new", queued=2))
    known = table(RunTime("a", (), 1.0), RunTime("b", (), 3.0))
    assert known.default_seconds == 2.0
    assert outstanding_seconds([work], known) == pytest.approx(4.0)


def test_tasks_the_breakdown_leaves_out_count_the_default() -> None:
    work = TaskGroup((), queued=10, running=2, functions=(FunctionTasks("f", queued=4),))
    assert outstanding_seconds([work], table(RunTime("f", (), 1.0))) == pytest.approx(4.0 + 8.0)


def test_the_estimate_is_the_one_of_the_tasks_capability_set() -> None:
    work = group(FunctionTasks("f", queued=2), capabilities=GPU)
    learned = table(RunTime("f", GPU, 1.0), RunTime("f", (), 10.0))
    assert outstanding_seconds([work], learned) == pytest.approx(2.0)


def test_before_anything_is_learned_a_task_counts_half_a_second_or_twice_its_longest_running_peer() -> None:
    assert outstanding_seconds([group(FunctionTasks("f", queued=5))], table()) == pytest.approx(2.5)
    # one has run 10 s without finishing: each counts 20 s (queued 5 x 20, and 10 s left of the running one)
    running = group(FunctionTasks("f", queued=5, running_seconds=(10.0,)))
    assert outstanding_seconds([running], table()) == pytest.approx(110.0)
    # the same for a function never seen while others were learned (its floor is their mean)
    assert outstanding_seconds([running], table(RunTime("g", (), 1.0))) == pytest.approx(110.0)
    assert outstanding_seconds([group(FunctionTasks("f", queued=5))], table(RunTime("g", (), 1.0))) == 5.0


def test_a_learned_mean_every_started_task_has_outrun_twice_is_out_of_date() -> None:
    # learned at 2 s; both running tasks have run past 4 s: the tasks got longer, each counts twice 6 s on average
    work = group(FunctionTasks("f", queued=10, running_seconds=(5.0, 7.0)))
    assert outstanding_seconds([work], table(RunTime("f", (), 2.0))) == pytest.approx(10 * 12.0 + 7.0 + 5.0)
    assert outrun_mean(2.0, (5.0, 7.0)) == pytest.approx(12.0)


def test_running_tasks_that_do_not_all_outrun_the_mean_twice_leave_it_as_learned() -> None:
    learned = table(RunTime("f", (), 2.0))
    one_slow = group(FunctionTasks("f", queued=10, running_seconds=(9.0,)))  # one long task: an outlier
    assert outstanding_seconds([one_slow], learned) == pytest.approx(10 * 2.0)
    slow_and_quick = group(FunctionTasks("f", queued=10, running_seconds=(1.0, 9.0, 9.0)))
    assert outstanding_seconds([slow_and_quick], learned) == pytest.approx(10 * 2.0 + 1.0)
    just_past_the_mean = group(FunctionTasks("f", queued=10, running_seconds=(3.0, 4.0)))  # not past twice it
    assert outstanding_seconds([just_past_the_mean], learned) == pytest.approx(10 * 2.0)


def test_a_task_its_worker_holds_but_has_not_started_says_nothing_of_the_run_time() -> None:
    # two started tasks outran 2 s twice; the third (0 s) is only held: it neither vetoes nor counts
    work = group(FunctionTasks("f", queued=1, running_seconds=(0.0, 5.0, 7.0)))
    assert outstanding_seconds([work], table(RunTime("f", (), 2.0))) == pytest.approx(12.0 + 12.0 + 7.0 + 5.0)
    assert outrun_mean(2.0, (0.0, 5.0)) == 0.0  # one started task is not enough


# ---------------------------------------------------------------- target_finish_seconds


def test_short_tasks_share_a_worker_instead_of_one_each() -> None:
    view = snapshot(group(FunctionTasks("f", queued=1000)), run_times=(RunTime("f", (), 0.01),))
    assert workers_wanted(WorkScaling(), view) == 1000  # one per task, as before
    assert workers_wanted(WorkScaling(target_finish_seconds=30.0), view) == 1  # 10 s of work


def test_long_tasks_get_the_workers_they_need() -> None:
    view = snapshot(group(FunctionTasks("f", queued=20)), run_times=(RunTime("f", (), 30.0),))
    assert workers_wanted(WorkScaling(target_finish_seconds=30.0), view) == 20
    assert workers_wanted(WorkScaling(target_finish_seconds=60.0), view) == 10
    assert workers_wanted(WorkScaling(target_finish_seconds=30.0), snapshot(
        group(FunctionTasks("f", queued=20)), run_times=(RunTime("f", (), 30.000000001),)
    )) == 20  # fmt: skip


def test_a_task_runs_on_one_worker_so_the_need_never_exceeds_the_count() -> None:
    view = snapshot(group(FunctionTasks("f", queued=20)), run_times=(RunTime("f", (), 3600.0),))
    assert workers_wanted(WorkScaling(target_finish_seconds=30.0), view) == 20
    assert workers_wanted(WorkScaling(tasks_per_worker=4, target_finish_seconds=30.0), view) == 5


def test_work_that_rounds_to_nothing_still_gets_a_worker() -> None:
    view = snapshot(group(FunctionTasks("f", queued=3)), run_times=(RunTime("f", (), 0.0),))
    assert workers_wanted(WorkScaling(target_finish_seconds=30.0), view) == 1


def test_the_managers_max_workers_bounds_the_need() -> None:
    view = snapshot(group(FunctionTasks("f", queued=100)), run_times=(RunTime("f", (), 60.0),), max_workers=8)
    assert workers_wanted(WorkScaling(target_finish_seconds=30.0), view) == 8


def test_before_any_task_finished_it_assumes_half_a_second_a_task_and_says_so() -> None:
    view = snapshot(group(FunctionTasks("f", queued=120)))
    policy = WorkScaling(target_finish_seconds=30.0)
    assert workers_wanted(policy, view) == 2  # 60 s of assumed work
    assert reason(policy, view) == (
        "120 tasks queued, 0 running, about 60.0 s of work: 2 workers needed to finish in 30 s, work policy "
        "(no task has finished yet: each counts 0.5 s, or twice the longest running one)"
    )


def test_the_reason_gives_the_work_in_seconds() -> None:
    view = snapshot(group(FunctionTasks("f", queued=40, running_seconds=(2.0,))), run_times=(RunTime("f", (), 3.0),))
    assert reason(WorkScaling(target_finish_seconds=30.0), view) == (
        "40 tasks queued, 1 running, about 121.0 s of work: 5 workers needed to finish in 30 s, work policy"
    )


def test_each_capability_set_is_sized_by_its_own_work() -> None:
    plain = group(FunctionTasks("f", queued=100))
    gpu = group(FunctionTasks("f", queued=10), capabilities=GPU)
    view = snapshot(plain, gpu, run_times=(RunTime("f", (), 0.3), RunTime("f", GPU, 30.0)), capabilities=GPU)
    target = WorkScaling(target_finish_seconds=30.0).decide(view, ScalingMemory()).decision["m"]
    assert {entry.capabilities: entry.workers for entry in target.entries} == {GPU: 10, (): 1}


def test_the_level_still_waits_a_cooldown_before_going_down() -> None:
    policy = WorkScaling(cooldown_seconds=15.0, target_finish_seconds=10.0)
    busy = snapshot(group(FunctionTasks("f", queued=10)), run_times=(RunTime("f", (), 10.0),))
    memory = policy.decide(busy, ScalingMemory()).memory
    quieter = ScalingSnapshot(
        now=5.0, task_groups=(group(FunctionTasks("f", queued=2)),), managers=busy.managers, run_times=busy.run_times
    )
    step = policy.decide(quieter, memory)
    assert sum(entry.workers for entry in step.decision["m"].entries) == 10


# ---------------------------------------------------------------- policy_content and the scheduler's view


def test_target_finish_seconds_is_a_work_option() -> None:
    content = parse_simple_content("allocate=even_load; scaling=work; target_finish_seconds=30")
    assert content.target_finish_seconds == 30.0
    assert parse_simple_content("allocate=even_load; scaling=work").target_finish_seconds is None
    policy = make_policy("simple", "allocate=even_load; scaling=work; target_finish_seconds=2.5").scaling
    assert policy == WorkScaling(target_finish_seconds=2.5)
    assert policy.name == "work(tasks_per_worker=1, cooldown_seconds=15, target_finish_seconds=2.5)"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "allocate=even_load; scaling=vanilla; target_finish_seconds=30",
            "applies to scaling=work or scaling=cost, not scaling=vanilla",
        ),
        ("allocate=even_load; scaling=work; target_finish_seconds=0", r"must be a finite number > 0"),
        ("allocate=even_load; scaling=work; target_finish_seconds=-5", r"must be a finite number > 0"),
        ("allocate=even_load; scaling=work; target_finish_seconds=inf", r"must be a finite number > 0"),
        ("allocate=even_load; scaling=work; target_finish_seconds=soon", r"'soon' is not a number"),
    ],
)
def test_bad_target_finish_seconds_is_refused(content: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_simple_content(content)


def test_the_scaling_snapshot_carries_the_views_functions_and_run_times() -> None:
    loads = (m.FunctionLoad("f", 3, (1.5,)), m.FunctionLoad("g", 1))
    status = m.StatusSnapshot(
        time=50.0,
        scheduler=m.SchedulerStats(),
        pending=(m.PendingGroup(GPU, 4, "", 1, 0.0, loads),),
        run_times=(m.RunTimeEstimate("f", GPU, 2.0),),
    )
    view = scaling_snapshot(status, 10.0)
    (task_group,) = view.task_groups
    assert task_group.functions == (FunctionTasks("f", 3, (1.5,)), FunctionTasks("g", 1))
    assert view.run_times == (RunTime("f", GPU, 2.0),)
