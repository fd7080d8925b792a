"""#38 finding 4: the index check blames a requirement only when pip says the index has no file of it; a check
that cannot run (no pip, an unreachable index, a pip that refuses the question) blames nothing. The texts are pip's
own (23.2 and 26), as they came out of the runs in the issue and of `pip install --dry-run` against an index that
is down.

With `answer_of` blaming the first requirement for any failure (as it did) the refusal and unreachable cases
fail."""

from __future__ import annotations

from scaler.worker_manager.ship.index_check import Unchecked, answer_of
from scaler.worker_manager.ship.unit_target import UnitTarget

TARGET = UnitTarget("3.11")

NOT_FOUND = (
    "ERROR: Could not find a version that satisfies the requirement tomli-wx (from versions: none)\n"
    "ERROR: No matching distribution found for tomli-wx\n"
)
REFUSED_BY_OLD_PIP = "ERROR: Can not use any platform or abi specific options unless installing via '--target'\n"
UNREACHABLE = (
    "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken "
    "by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object at 0x7f>: Failed to establish a "
    "new connection: [Errno 111] Connection refused')': /simple/tomli-w/\n" + NOT_FOUND.replace("tomli-wx", "tomli-w")
)


def test_a_requirement_the_index_has_no_file_of_is_named() -> None:
    answer = answer_of(1, NOT_FOUND, ["tomli-w", "tomli-wx"], TARGET)
    assert answer == ("tomli-wx", "the package index has no file of it for Python 3.11 on Linux x86_64 "
                      "(from versions: none)")  # fmt: skip


def test_a_question_pip_refuses_blames_no_requirement() -> None:
    answer = answer_of(1, REFUSED_BY_OLD_PIP, ["tomli-w"], TARGET)
    assert isinstance(answer, Unchecked) and "unless installing via '--target'" in answer.reason


def test_an_unreachable_index_blames_no_requirement() -> None:
    answer = answer_of(1, UNREACHABLE, ["tomli-w"], TARGET)
    assert isinstance(answer, Unchecked) and "could not be reached" in answer.reason
    assert "Connection refused" in answer.reason


def test_no_pip_and_success() -> None:
    assert isinstance(answer_of(1, "/usr/bin/python3: No module named pip\n", ["x"], TARGET), Unchecked)
    assert answer_of(0, "", ["x"], TARGET) is None


def test_an_unreadable_requirement_is_named() -> None:
    answer = answer_of(1, "ERROR: Invalid requirement: 'bad req!!'\n", ["tomli-w", "bad req!!"], TARGET)
    assert answer is not None and not isinstance(answer, Unchecked) and answer[0] == "bad req!!"
