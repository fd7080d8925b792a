"""`future.story()` on a real cluster: a normal task told across client, scheduler and processor in time order; a
task that waits for a capability (the story names the reason) until a worker with it joins; a task retried after
its worker is killed (the story names the retry and why); a task the scheduler forgot (it says so).

Checked with the scheduler's recording switched off by hand (the core's `StoryBook` built with 0 tasks): the test
fails at the first story, which comes back `known=False` with only the client's two entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler import Client
from scaler.client.story import TaskStory
from tests.integration.conftest import Launcher, kill_tree, wait_all_gone, wait_for, wait_for_workers

pytestmark = pytest.mark.integration


def inc(x: int) -> int:
    return x + 1


def first_run_hangs(path: str) -> int:
    """The first run writes its worker agent's pid to `path` and sleeps (to be killed); a retry returns at once."""
    import os
    import time

    import psutil

    if not os.path.exists(path):
        with open(path, "w") as marker:
            marker.write(str(psutil.Process(os.getppid()).ppid()))  # processor -> zygote -> agent
        time.sleep(120)
    return 7


def steps(story: TaskStory) -> list[tuple[str, str]]:
    return [(entry.component, entry.what) for entry in story.entries]


@pytest.mark.timeout(120)
def test_stories_of_a_normal_a_waiting_a_retried_and_a_forgotten_task(launcher: Launcher, tmp_path: Path) -> None:
    scheduler_args = ("-pc", "allocate=capability; scaling=no", "--story-retention-tasks", "4", "-wt", "10")
    addresses, _, _ = launcher.stack(workers=0, scheduler_args=scheduler_args)
    launcher.worker(addresses.scheduler, "-his", "0.5")
    launcher.worker(addresses.scheduler, "-his", "0.5")
    wait_for_workers(addresses.monitor, 2)
    with Client(address=addresses.scheduler) as client:
        # a normal task: client -> scheduler -> processor -> scheduler -> client, in time order
        normal = client.submit(inc, 1)
        assert normal.result(timeout=60) == 2
        story = normal.story()
        assert story.known, story.note
        assert steps(story) == [
            ("client", "submitted"),
            ("scheduler", "queued"),
            ("scheduler", "dispatched"),
            ("processor", "received on its link"),
            ("processor", "started"),
            ("processor", "finished (success)"),
            ("scheduler", "success"),
            ("client", "answered"),
        ], str(story)
        times = [entry.wall_time for entry in story.entries]
        assert times == sorted(times)
        assert "submitted by client" in story.entries[1].cause and story.entries[2].cause == "dispatch attempt 1"
        worker = story.entries[2].where.split(", worker ")[1]  # "instance <id>, worker <id>"
        assert story.entries[1].where.startswith("instance ") and story.entries[2].where.startswith("instance ")
        assert story.entries[4].where.startswith("pid ") and story.entries[4].where.endswith(f"of worker {worker}")

        # a task that waits for a capability no worker has, until a worker with it joins
        waiting = client.submit_verbose(inc, (2,), {}, capabilities={"gpu": 1})
        wait_for(lambda: "waiting" in [e.what for e in waiting.story().entries], "the story to tell the wait")
        assert not waiting.done()
        launcher.worker(addresses.scheduler, "-his", "0.5", "-pwc", "gpu")
        assert waiting.result(timeout=60) == 3
        story = waiting.story()
        (wait,) = [entry for entry in story.entries if entry.what == "waiting"]
        assert "no connected worker has the capabilities gpu" in wait.cause, str(story)
        whats = [entry.what for entry in story.entries]
        assert whats.index("queued") < whats.index("waiting") < whats.index("dispatched") < whats.index("success")

        # a task retried after its worker is killed: the story names the retry and the lost worker
        marker = tmp_path / "agent"
        retried = client.submit(first_run_hangs, str(marker))
        agent = int(wait_for(lambda: marker.exists() and marker.read_text(), "the first run to start"))
        wait_all_gone(kill_tree(agent), "the killed worker's processes to disappear")
        assert retried.result(timeout=60) == 7
        story = retried.story()
        retries = [entry for entry in story.entries if entry.cause.startswith("retry 1 of 3")]
        assert [entry.what for entry in retries] == ["queued"], str(story)
        assert "lost" in retries[0].cause or "connection" in retries[0].cause, str(story)
        dispatches = [entry.cause for entry in story.entries if entry.what == "dispatched"]
        assert dispatches == ["dispatch attempt 1", "dispatch attempt 2"], str(story)

        # a task the scheduler forgot: 4 finished stories are kept, the normal task's is the oldest
        for value in range(3):
            assert client.submit(inc, value).result(timeout=60) == value + 1
        story = normal.story()
        assert not story.known and "forgotten" in story.note and "4 tasks" in story.note, str(story)
        assert steps(story) == [("client", "submitted"), ("client", "answered")]
