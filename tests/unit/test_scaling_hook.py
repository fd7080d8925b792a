"""The scaling hook: policy settings -> a hook, and the real SchedulerCore's state -> ScalingSnapshot -> targets."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest

from scaler.policy.content import Allocation
from scaler.policy.decision import ScalingMemory, ScalingStep
from scaler.policy.scaling import VanillaScaling
from scaler.policy.snapshot import ScalingSnapshot, scaling_snapshot
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ClientID, PeerID, TaskID
from scaler.scheduler.core.effects import Effect, Send
from scaler.scheduler.core.events import Received, Tick
from scaler.scheduler.core.scheduler_core import CoreSettings, SchedulerCore
from scaler.scheduler.scaling_hook import (
    PolicyScalingHook,
    allocation_policy,
    make_scaling_hook,
)

CLIENT = b"Client|c"


def hello(info: m.RoleInfo) -> m.Hello:
    return m.Hello(m.PROTOCOL_VERSION, local_python_version(), 1, "host", info)


def task(number: int, capabilities: m.Capabilities = ()) -> m.Task:
    return m.Task(TaskID(number.to_bytes(16, "big")), ClientID(CLIENT), b"body", "f", 0, capabilities)


def worker_id(unit: str) -> bytes:
    return f"Worker|NAT-{unit}|{'0' * 32}".encode()


@dataclass
class Cluster:
    core: SchedulerCore
    now: float = 0.0
    effects: list[Effect] = field(default_factory=list)

    def send(self, peer: bytes, message: m.Message) -> list[Effect]:
        effects = self.core.handle(Received(PeerID(peer), message, self.now))
        self.effects.extend(effects)
        return effects

    def heartbeat(self, manager: bytes) -> m.ManagerTarget | None:
        targets = targets_to(self.send(manager, m.Heartbeat(manager=m.ManagerStatus())), manager)
        return targets[-1] if targets else None

    def add_manager(self, peer: bytes, manager_id: str, max_workers: int | None = None,
                    capabilities: m.Capabilities = ()) -> list[Effect]:  # fmt: skip
        return self.send(peer, hello(m.ManagerInfo(manager_id, capabilities, max_workers, "test")))

    def add_worker(self, peer: bytes, manager_id: str = "", capabilities: m.Capabilities = ()) -> None:
        """A worker, and its processor's link (where its tasks go)."""
        self.send(peer, hello(m.WorkerInfo(capabilities, 1, manager_id, "NAT")))
        self.send(peer + b"/p1", hello(m.ProcessorInfo(b"p1", peer)))

    def submit(self, *tasks: m.Task) -> None:
        if PeerID(CLIENT) not in self.core.clients:
            self.send(CLIENT, hello(m.ClientInfo()))
        for each in tasks:
            self.send(CLIENT, each)


def snapshot_of(core: SchedulerCore) -> ScalingSnapshot:
    """What the hook hands the policy: the snapshot derived from the core's view."""
    return scaling_snapshot(core.view(), core.settings.manager_timeout_seconds)


def targets_to(effects: list[Effect], peer: bytes) -> list[m.ManagerTarget]:
    return [
        e.message for e in effects if isinstance(e, Send) and e.peer == peer and isinstance(e.message, m.ManagerTarget)
    ]


def cluster(content: str = "allocate=even_load; scaling=vanilla", engine: str = "simple") -> Cluster:
    settings = CoreSettings(
        "tcp://s:1", "tcp://s:2", local_python_version(), allocate=allocation_policy(engine, content)
    )
    return Cluster(SchedulerCore(settings, make_scaling_hook(engine, content), strict=True))


# ---------------------------------------------------------------- policy settings


def test_allocation_comes_from_the_policy() -> None:
    assert allocation_policy("simple", "allocate=capability; scaling=vanilla") is Allocation.CAPABILITY
    assert allocation_policy("simple", "allocate=even_load; scaling=no") is Allocation.EVEN_LOAD
    assert allocation_policy("waterfall_v1", "1, m1") is Allocation.CAPABILITY


@pytest.mark.parametrize(
    "engine, content, words",
    [
        ("simple", "allocate=even_load; scaling=sometimes", "sometimes"),
        ("simple", "allocate=even_load", "scaling"),
        ("waterfall_v1", "", "no rules"),
        ("fancy", "allocate=even_load; scaling=no", "fancy"),
    ],
)
def test_bad_policy_settings_are_a_value_error_naming_the_problem(engine: str, content: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        allocation_policy(engine, content)
    with pytest.raises(ValueError, match=words):
        make_scaling_hook(engine, content)


def test_scaling_no_installs_no_hook_so_managers_get_only_echoes() -> None:
    assert make_scaling_hook("simple", "allocate=even_load; scaling=no") is None
    c = cluster("allocate=even_load; scaling=no")
    c.add_manager(b"m", "m1")
    c.submit(task(1))
    effects = c.send(b"m", m.Heartbeat(manager=m.ManagerStatus()))
    assert [type(e.message) for e in effects if isinstance(e, Send)] == [m.HeartbeatEcho]


# ---------------------------------------------------------------- the snapshot


def test_snapshot_counts_queued_and_running_tasks_per_group_and_views_every_peer() -> None:
    c = cluster("allocate=capability; scaling=vanilla")
    c.now = 5.0
    c.add_manager(b"m", "m1", max_workers=4, capabilities=(("gpu", -1),))
    c.add_worker(worker_id("u1"), "m1", (("gpu", -1),))
    c.now = 7.0
    c.add_worker(b"Worker|FIX|1", "")
    c.now = 9.0
    c.submit(task(3, (("gpu", 1),)), task(4, (("gpu", 1),)), task(5, (("gpu", 1),)), task(1), task(2))
    c.core.handle(Tick(10.0))
    snapshot = snapshot_of(c.core)

    assert snapshot.now == 10.0
    groups = {group.capabilities: (group.queued, group.running) for group in snapshot.task_groups}
    # the gpu worker u1 takes a gpu task, the fixed worker a plain one (capacity 1 each)
    assert groups == {(): (1, 1), (("gpu", 1),): (2, 1)}
    assert all(group.oldest_queued_seconds == pytest.approx(1.0) for group in snapshot.task_groups)
    views = {view.worker_id: view for view in snapshot.workers}
    assert set(views) == {worker_id("u1").decode(), "Worker|FIX|1"}
    assert views[worker_id("u1").decode()].manager_id == "m1"
    assert views[worker_id("u1").decode()].assigned == 1
    assert views[worker_id("u1").decode()].connected_since == 5.0
    assert views["Worker|FIX|1"].manager_id == ""
    (manager,) = snapshot.managers
    assert (manager.manager_id, manager.max_workers, manager.capabilities) == ("m1", 4, (("gpu", -1),))
    assert manager.seconds_since_heartbeat == pytest.approx(5.0)
    assert manager.last_target is not None  # sent when it registered


def test_even_load_groups_every_task_together() -> None:
    c = cluster("allocate=even_load; scaling=vanilla")
    c.submit(task(1), task(2, (("gpu", 1),)))
    (group,) = snapshot_of(c.core).task_groups
    assert (group.capabilities, group.queued, group.running) == ((), 2, 0)


def test_finished_tasks_leave_the_snapshot() -> None:
    c = cluster()
    c.add_worker(worker_id("u1"), "m1")
    c.submit(task(1))
    c.send(worker_id("u1") + b"/p1", m.TaskResult(task(1).task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v"))
    snapshot = snapshot_of(c.core)
    assert snapshot.task_groups == () and snapshot.workers[0].assigned == 0


# ---------------------------------------------------------------- targets


def test_vanilla_targets_follow_the_load_and_drain_idle_workers() -> None:
    c = cluster()
    (first,) = targets_to(c.add_manager(b"m", "m1", max_workers=4), b"m")
    assert first == m.ManagerTarget(entries=())  # no tasks: no workers (sent on registration)
    c.submit(*(task(n) for n in range(30)))
    c.now = 1.0
    assert c.heartbeat(b"m") == m.ManagerTarget((m.TargetEntry((), 1),))  # no worker yet: one more
    c.add_worker(worker_id("u1"), "m1")
    c.add_worker(worker_id("u2"), "m1")
    c.now = 2.0
    target = c.heartbeat(b"m")
    assert target is not None and target.entries == (m.TargetEntry((), 3),)  # 30 tasks on 2 workers: ratio > 10
    assert target.drain == ()  # both busy

    while c.core.tasks.records:  # the workers run everything
        for worker in list(c.core.workers.values()):
            for task_id in list(worker.assigned):
                c.send(worker.peer + b"/p1", m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v"))
    c.now = 3.0
    target = c.heartbeat(b"m")
    assert target is not None and target.entries == ()
    assert set(target.drain) == {worker_id("u1").decode(), worker_id("u2").decode()}


def test_waterfall_sends_targets_only_to_managers_with_a_rule_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    c = cluster("1, tier1, 2\n2, tier2, 2", "waterfall_v1")
    c.add_manager(b"t1", "tier1")
    c.add_manager(b"t2", "tier2")
    c.add_manager(b"x", "stray")
    c.submit(*(task(n) for n in range(40)))
    with caplog.at_level(logging.WARNING, logger="scaler.scheduler.scaling_hook"):
        for step in range(3):
            c.now = 1.0 + step
            assert c.heartbeat(b"t1") == m.ManagerTarget((m.TargetEntry((), 2),))
            assert c.heartbeat(b"t2") == m.ManagerTarget((m.TargetEntry((), 2),))
            assert c.heartbeat(b"x") is None
    assert [r.getMessage() for r in caplog.records].count(
        "scaling: worker manager 'stray' has no waterfall_v1 rule; it gets no target"
    ) == 1


@dataclass
class CountingPolicy:
    inner: VanillaScaling = field(default_factory=VanillaScaling)
    calls: int = 0

    @property
    def name(self) -> str:
        return "counting"

    def decide(self, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingStep:
        self.calls += 1
        return self.inner.decide(snapshot, memory)


def test_managers_heartbeating_in_one_step_share_one_decision_and_a_new_step_decides_again() -> None:
    policy = CountingPolicy()
    settings = CoreSettings("tcp://s:1", "tcp://s:2", local_python_version())
    core = SchedulerCore(settings, PolicyScalingHook(policy), strict=True)
    c = Cluster(core)
    c.add_manager(b"a", "a")
    c.add_manager(b"b", "b")  # the manager set changed: a new decision
    assert policy.calls == 2
    beat = m.Heartbeat(manager=m.ManagerStatus())
    core.handle_all([Received(PeerID(b"a"), beat, 1.0), Received(PeerID(b"b"), beat, 1.0)])  # one socket read
    assert policy.calls == 3
    c.now = 1.0
    c.heartbeat(b"a")  # the same instant, a later step: the state may have changed since
    assert policy.calls == 4


def test_the_policy_memory_is_kept_between_decisions() -> None:
    c = cluster("allocate=even_load; scaling=work; cooldown_seconds=30")
    c.add_manager(b"m", "m1", max_workers=8)
    c.submit(*(task(n) for n in range(5)))
    c.now = 1.0
    assert c.heartbeat(b"m") == m.ManagerTarget((m.TargetEntry((), 5),))
    hook = c.core._scaling
    assert isinstance(hook, PolicyScalingHook)
    assert hook.memory.levels_of("m1")  # the work policy's level for m1 is remembered


def test_no_busy_worker_is_stopped_whatever_the_policy() -> None:
    # waterfall at 10 tasks per worker: 30 tasks want 3 workers, 19 left want 2; the 3 are busy and 16 queue
    c = cluster("1, tier1, 4\ntasks_per_worker = 10", engine="waterfall_v1")
    c.add_manager(b"m", "tier1", max_workers=4)
    c.submit(*(task(n) for n in range(30)))
    for unit in ("u1", "u2", "u3"):
        c.add_worker(worker_id(unit), "tier1")
    while len(c.core.tasks.records) > 19:  # the workers finish 11 tasks; each takes the next one
        worker = next(worker for worker in c.core.workers.values() if worker.assigned)
        task_id = next(iter(worker.assigned))
        c.send(worker.peer + b"/p1", m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v"))
    assert all(worker.assigned for worker in c.core.workers.values()), "all three still busy"
    c.now = 1.0
    target = c.heartbeat(b"m")
    assert target is not None and sum(entry.workers for entry in target.entries) == 3, target
    assert "kept at its 3 busy workers until they finish their tasks" in c.core._scaling.reason("tier1")  # type: ignore[union-attr]
