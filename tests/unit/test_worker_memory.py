"""The worker's memory truth (scaler/worker/memory.py): cgroup paths and limits parsed as the kernel writes them,
the smallest limit along a cgroup's ancestors, and the verdict on a processor's death."""

from __future__ import annotations

from pathlib import Path

import psutil

from scaler.worker.memory import (
    MemoryLimit,
    MemoryWatch,
    cgroup_paths,
    find_memory_limit,
    parse_limit,
    parse_oom_kills,
)


def test_cgroup_paths_of_a_v1_and_a_v2_process() -> None:
    v1 = "9:name=systemd:/\n4:memory:/docker/abc\n1:cpu,cpuacct:/docker/abc\n0::/"
    assert cgroup_paths(v1) == ("/docker/abc", "/")
    assert cgroup_paths("0::/user.slice/job.scope\n") == (None, "/user.slice/job.scope")


def test_limits_and_oom_counters_parse_as_the_kernel_writes_them() -> None:
    assert parse_limit("max\n") is None
    assert parse_limit("9223372036854771712\n") is None  # v1's "no limit"
    assert parse_limit("419430400\n") == 400 << 20
    assert parse_oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n") == 3
    assert parse_oom_kills("low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\n") == 1
    assert parse_oom_kills("nr_free_pages 10\n") == 0


def test_the_smallest_limit_along_the_ancestors_wins_in_v1_and_v2(tmp_path: Path) -> None:
    """Checked by switching it off: reading only the process's own cgroup finds the 1 GiB limit, not the 512 MiB."""
    v1 = tmp_path / "v1"
    (v1 / "memory" / "outer" / "inner").mkdir(parents=True)
    (v1 / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (v1 / "memory" / "outer" / "memory.limit_in_bytes").write_text(str(512 << 20))
    (v1 / "memory" / "outer" / "inner" / "memory.limit_in_bytes").write_text(str(1 << 30))
    proc = tmp_path / "cgroup-v1"
    proc.write_text("4:memory:/outer/inner\n")
    limit = find_memory_limit(v1, proc)
    assert (limit.limit_bytes, limit.source, limit.cgroup_dir) == (512 << 20, "cgroup v1", v1 / "memory" / "outer")

    v2 = tmp_path / "v2"
    (v2 / "job").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("memory\n")
    (v2 / "job" / "memory.max").write_text(str(256 << 20))
    proc.write_text("0::/job\n")
    assert find_memory_limit(v2, proc) == MemoryLimit(256 << 20, "cgroup v2", v2 / "job")

    proc.write_text("0::/\n")  # no limit anywhere: the machine's memory
    assert find_memory_limit(v2, proc) == MemoryLimit(psutil.virtual_memory().total, "machine")


def test_a_sigkill_while_the_oom_counter_moved_is_out_of_memory_with_the_tasks_peak(tmp_path: Path) -> None:
    """Checked by switching it off: a verdict that ignores the counter says "" for the second death."""
    cgroup = tmp_path / "job"
    cgroup.mkdir()
    (cgroup / "memory.events").write_text("oom_kill 0\n")
    watch = MemoryWatch(MemoryLimit(1 << 30, "cgroup v2", cgroup))
    watch.sample(b"p1", b"task-a", 100 << 20)
    watch.sample(b"p1", b"task-a", 300 << 20)
    watch.sample(b"p1", b"task-a", 200 << 20)
    assert watch.verdict(b"p1", "killed by SIGKILL") == ""  # no OOM counted, far from the limit: killed by someone
    watch.sample(b"p2", b"task-b", 100 << 20)
    watch.sample(b"p2", b"task-b", 700 << 20)
    (cgroup / "memory.events").write_text("oom_kill 1\n")
    assert watch.verdict(b"p2", "exit code 1") == ""  # not a kill
    watch.sample(b"p3", b"task-c", 600 << 20)
    (cgroup / "memory.events").write_text("oom_kill 2\n")
    text = watch.verdict(b"p3", "killed by SIGKILL")
    assert text.startswith("out of memory: the processor was killed by the kernel's OOM killer")
    assert "peak memory seen: 600.0 MiB" in text and "limit: 1024.0 MiB (cgroup v2)" in text


def test_a_v1_kill_counted_in_the_workers_own_cgroup_below_the_limiting_one_is_out_of_memory(tmp_path: Path) -> None:
    """Slurm's layout: the worker in `task_0` (no limit of its own) under its step's and job's limits. cgroup v1 counts
    an OOM kill in the killed process's cgroup only (seen in a job of a real Slurm: `oom_kill 1` in task_0's
    memory.oom_control, 0 in step_batch's, which holds the limit). Checked by switching it off: watching the limiting
    cgroup's counter alone says "died at the worker's memory limit" instead."""
    memory = tmp_path / "memory"
    task = memory / "slurm_n1" / "uid_0" / "job_7" / "step_batch" / "task_0"
    task.mkdir(parents=True)
    for directory in (task, *task.parents):
        if directory == tmp_path:
            break
        (directory / "memory.limit_in_bytes").write_text("9223372036854771712\n")
        (directory / "memory.oom_control").write_text("oom_kill_disable 0\noom_kill 0\n")
    for limited in (task.parent, task.parent.parent):  # Slurm limits the step and the job alike
        (limited / "memory.limit_in_bytes").write_text(str(400 << 20))
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/slurm_n1/uid_0/job_7/step_batch/task_0\n")
    limit = find_memory_limit(tmp_path, proc)
    assert (limit.limit_bytes, limit.cgroup_dir, limit.counted_dirs) == (400 << 20, task.parent, (task, task.parent))
    watch = MemoryWatch(limit)
    watch.sample(b"p1", b"task-a", 100 << 20)  # sampled well below the limit: only the counter tells
    (task / "memory.oom_control").write_text("oom_kill_disable 0\noom_kill 1\n")
    text = watch.verdict(b"p1", "killed by SIGKILL")
    assert text.startswith("out of memory: the processor was killed by the kernel's OOM killer"), text
    assert "limit: 400.0 MiB (cgroup v1)" in text


def test_a_new_task_starts_a_new_peak_and_a_death_at_the_limit_counts() -> None:
    watch = MemoryWatch(MemoryLimit(1 << 30, "machine", None))
    watch.sample(b"p1", b"task-a", 900 << 20)
    watch.sample(b"p1", b"task-b", 990 << 20)
    watch.agent_bytes = 40 << 20
    text = watch.verdict(b"p1", "killed by SIGKILL")
    assert "died at the worker's memory limit" in text and "peak memory seen: 990.0 MiB" in text
