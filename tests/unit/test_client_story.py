"""The client's side of a task's story: its own entries merged with the scheduler's reply in time order, and what
the user sees when the scheduler forgot the task or did not answer."""

from __future__ import annotations

from scaler.client.story import merge_story
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID

T = TaskID(b"\x01" * 16)
MINE = [
    m.StoryEntry(10.0, "client", "c", "submitted", "the user's call"),
    m.StoryEntry(13.0, "client", "c", "answered"),
]


def test_the_client_entries_and_the_schedulers_are_merged_in_time_order() -> None:
    reply = m.TaskStoryReply(T, True, (m.StoryEntry(11.0, "scheduler", "", "queued"), m.StoryEntry(12.0, "processor")))
    story = merge_story(T.hex(), reply, MINE, 10.0)
    assert [entry.wall_time for entry in story] == [10.0, 11.0, 12.0, 13.0] and story.known and len(story) == 4
    text = str(story)
    assert text.splitlines()[0] == f"story of task {T.hex()}" and "submitted <- the user's call" in text


def test_a_forgotten_task_says_why_and_keeps_the_clients_entries() -> None:
    reply = m.TaskStoryReply(T, False, (), "the scheduler does not know this task: ... forgotten")
    story = merge_story(T.hex(), reply, MINE, 10.0)
    assert not story.known and "forgotten" in story.note and "forgotten" in str(story).splitlines()[0]
    assert [entry.component for entry in story] == ["client", "client"]


def test_no_answer_in_time_is_said_so() -> None:
    story = merge_story(T.hex(), None, MINE, 2.5)
    assert not story.known and "did not answer within 2.5 s" in story.note
