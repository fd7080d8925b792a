"""Trace files of `scaler_simulate_policy` (`scaler.policy.trace_csv`): what they say, and every refusal."""

from __future__ import annotations

import pytest

from scaler.policy.trace_csv import TraceFileError, parse_trace_csv
from scaler.policy.traces import TaskArrival


def test_two_to_four_columns_a_header_comments_and_blank_lines() -> None:
    text = (
        "arrival_seconds, duration_seconds, capabilities, function_name\n"
        "# a comment\n"
        "2.5, 1\n"
        "\n"
        '0, 30, "gpu,mem=8", train\n'
        "1, 0.01, , score\n"
        "1, 0.02, gpu\n"
    )
    assert parse_trace_csv(text, "t.csv") == (
        TaskArrival(0.0, 30.0, (("gpu", -1), ("mem", 8)), "train"),
        TaskArrival(1.0, 0.01, (), "score"),
        TaskArrival(1.0, 0.02, (("gpu", -1),), "f"),
        TaskArrival(2.5, 1.0, (), "f"),
    )


def test_without_a_header_the_first_line_is_a_task() -> None:
    assert parse_trace_csv("0,1\n", "t.csv") == (TaskArrival(0.0, 1.0),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0,1\n1,x\n", "t.csv, line 2: duration_seconds 'x' is not a number"),
        ("1.o,2\n", "t.csv, line 1: arrival_seconds '1.o' is not a number"),  # a typo, not a header
        ("h1,h2\n-1,2\n", "t.csv, line 2: arrival_seconds '-1' must be a finite number >= 0"),
        ("0,inf\n", "t.csv, line 1: duration_seconds 'inf' must be a finite number >= 0"),
        ("0,nan\n", "t.csv, line 1: duration_seconds 'nan' must be a finite number >= 0"),
        ("0\n", "t.csv, line 1: 1 fields; expected 2 to 4"),
        ("0,1,,f,extra\n", "t.csv, line 1: 5 fields; expected 2 to 4"),
        ("0,1,gpu=x\n", "t.csv, line 1: capability 'gpu' in 'gpu=x' has value 'x'"),
        ('0,1,"gpu\n', "t.csv, line 1: not a CSV line"),
        ("arrival,duration\n\n# nothing\n", "t.csv: no tasks"),
        ("", "t.csv: no tasks"),
    ],
)
def test_a_bad_line_is_refused_naming_the_file_and_line(text: str, message: str) -> None:
    with pytest.raises(TraceFileError) as refused:
        parse_trace_csv(text, "t.csv")
    assert str(refused.value).startswith(message)


def test_the_commands_help_names_and_explains_each_column(capsys: pytest.CaptureFixture[str]) -> None:
    """issue 60: `scaler_simulate_policy -h` said "TRACE  the trace, a CSV file" and named the columns in one quoted
    line at the end: each column is named in TRACE's help and explained, and the example it gives parses."""
    from scaler.entry_points.simulate_policy import main

    with pytest.raises(SystemExit):
        main(["-h"])
    text = capsys.readouterr().out
    trace_help = " ".join(text.split("positional arguments:")[1].split("options:")[0].split())
    columns = ("arrival_seconds", "duration_seconds", "capabilities", "function_name")
    assert all(column in trace_help for column in columns)
    explained = {line.split()[0] for line in text.splitlines() if line.startswith("  ") and len(line.split()) > 2}
    assert set(columns) <= explained
    (example,) = [line.split("e.g.", 1)[1] for line in text.splitlines() if line.strip().startswith("e.g.")]
    assert parse_trace_csv(example, "help") == (TaskArrival(0.5, 12.0, (("gpu", -1),), "train"),)
