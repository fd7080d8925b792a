"""A processor's mark of the task it computes (worker/computing_mark.py): what the processor writes is what
its agent reads after it died, through a real shared file; a task that handed over its result or parked is not named.
Checked with `done` clearing nothing, the second test fails; with `done` clearing whatever is marked, the third."""

from __future__ import annotations

from pathlib import Path

from scaler.worker.computing_mark import ComputingMark, marks_directory, read_mark, remove_marks


def test_the_agent_reads_the_task_computing_and_the_file_goes() -> None:
    directory = marks_directory(b"Worker|FIX|abcdefgh")
    try:
        mark = ComputingMark(directory, b"p1")
        assert read_mark(directory, b"p1") == b"", "nothing computed yet: none is to blame"
        mark = ComputingMark(directory, b"p1")
        mark.computing(b"t" * 16)
        assert read_mark(directory, b"p1") == b"t" * 16
        assert not list(Path(directory).iterdir()), "read once, then removed"
        assert read_mark(directory, b"p1") is None, "no mark: not known"
        mark.close()
    finally:
        remove_marks(directory)
    assert not Path(directory).exists()


def test_a_task_whose_result_was_handed_over_is_not_named() -> None:
    directory = marks_directory(b"w")
    try:
        mark = ComputingMark(directory, b"p1")
        mark.computing(b"a" * 16)
        mark.done(b"a" * 16)
        assert read_mark(directory, b"p1") == b""
    finally:
        remove_marks(directory)


def test_only_a_task_s_own_mark_is_cleared_by_it() -> None:
    """A parked task that goes on marks itself again; the one before it, ending on another thread, clears nothing."""
    directory = marks_directory(b"w")
    try:
        mark = ComputingMark(directory, b"p1")
        mark.computing(b"a" * 16)
        mark.computing(b"b" * 16)
        mark.done(b"a" * 16)
        assert read_mark(directory, b"p1") == b"b" * 16
        mark = ComputingMark(directory, b"p2")
        mark.computing(b"x" * 300)
        assert read_mark(directory, b"p2") is None, "an id too long to write: not known"
    finally:
        remove_marks(directory)


def test_the_marks_of_a_worker_that_died_without_removing_them_go_when_another_starts() -> None:
    """A SIGKILLed worker removes nothing: the next worker on the host removes its directory (its pid is gone).
    Checked to fail with `_remove_orphans` doing nothing."""
    import subprocess
    import sys

    code = "from scaler.worker.computing_mark import marks_directory; print(marks_directory(b'w'))"
    orphan = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert Path(orphan).is_dir()
    mine = marks_directory(b"w")
    try:
        assert not Path(orphan).exists()
        assert Path(mine).is_dir()
    finally:
        remove_marks(mine)
