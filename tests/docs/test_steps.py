"""The documentation tier's own mechanics, on small pages written here: what it reads as steps, that what one step
exports or saves reaches the next, that a step doing other than its page says fails the page, and that a
long-running command is started, waited for and stopped with Ctrl-C.

Checked by switching parts off: with the environment of a shell step not carried over (`_foreground` keeping the old
environment), test_an_export_reaches_the_next_steps fails; with `_shown_lines` returning nothing, the wrong-output
test passes its script and fails; with the Ctrl-C step not sending SIGINT, the scheduler is still running when
test_a_long_running_command_is_ready_then_stopped_by_ctrl_c checks it (it is then killed at the end, as a failure).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from tests.docs.programs import long_running
from tests.docs.runner import PageRun
from tests.docs.steps import Kind, PageError, page_steps

PAGE = """# A page

Some prose with `inline code`, which is not a step.

```bash
export GREETING=hello \\
  OTHER=1   # a comment
# a comment line
mkdir -p sub && cd sub
```

<!-- doc-test: skip reason="needs a real AWS account" -->
```bash
aws sts get-caller-identity
```

```python
# helpers.py
def double(x):
    return 2 * x
```

<!-- doc-test: timeout seconds="30" -->
```py
import os
print(os.environ["GREETING"])   # hello
```

```toml
# stack.toml
[scheduler]
bind_address = "tcp://127.0.0.1:8516"
```

```
an output sample: not a step
```

<!-- doc-test: ctrl-c command="scaler stack.toml" -->
"""


def test_the_steps_of_a_page_are_its_blocks_in_order() -> None:
    steps = page_steps("page.md", PAGE)
    assert [step.kind for step in steps] == [Kind.SHELL, Kind.SHELL, Kind.FILE, Kind.PYTHON, Kind.TOML, Kind.CTRL_C]
    assert steps[0].commands == ("export GREETING=hello OTHER=1   # a comment", "mkdir -p sub && cd sub")
    assert steps[1].skip_reason == "needs a real AWS account"
    assert (steps[2].file_name, steps[4].file_name) == ("helpers.py", "stack.toml")
    assert steps[3].timeout_seconds == 30 and steps[0].skip_reason is None
    assert steps[5].text == "scaler stack.toml"
    assert steps[3].where == "page.md:24 (python)"


@pytest.mark.parametrize(
    ("markup", "problem"),
    [
        ("<!-- doc-test: skip -->\n```bash\nls\n```\n", "non-empty reason"),
        ('<!-- doc-test: skip reason="" -->\n```bash\nls\n```\n', "non-empty reason"),
        ("<!-- doc-test: run-twice -->\n```bash\nls\n```\n", "unknown doc-test directive"),
        ('<!-- doc-test: skip because="x" -->\n```bash\nls\n```\n', "takes reason="),
        ('<!-- doc-test: skip reason="x" -->\n```json\n{}\n```\n', "not a step"),
        ('<!-- doc-test: skip reason="x" -->\n', "no block after it"),
        ("```bash\nls\n", "never closed"),
    ],
)
def test_markup_the_tier_cannot_follow_is_an_error_of_the_page(markup: str, problem: str) -> None:
    with pytest.raises(PageError, match=problem):
        page_steps("page.md", markup)


def page_run(tmp_path: Path) -> PageRun:
    """A page run with this interpreter as the reader's Python and this environment's commands on the PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return PageRun("page.md", tmp_path, {**os.environ, "PATH": path}, Path(sys.executable))


@pytest.mark.integration  # it runs the steps: shells, scripts, servers
def test_an_export_reaches_the_next_steps_and_files_are_saved_where_the_shell_is(tmp_path: Path) -> None:
    run = page_run(tmp_path)
    steps = page_steps("page.md", PAGE)[:5]
    results = [run.run(step) for step in steps]
    assert [result.outcome for result in results] == ["ran", "skipped", "ran", "ran", "ran"], results
    assert (tmp_path / "sub" / "helpers.py").read_text().startswith("# helpers.py")
    assert (tmp_path / "sub" / "stack.toml").exists()
    assert run.finish() == []


@pytest.mark.integration  # it runs the steps: shells, scripts, servers
def test_a_script_that_prints_other_than_the_page_says_fails(tmp_path: Path) -> None:
    (step,) = page_steps("page.md", "```python\nprint(2 + 2)   # 5\n```\n")
    result = page_run(tmp_path).run(step)
    assert result.outcome == "failed" and "the page says it prints '5'" in result.detail


@pytest.mark.integration  # it runs the steps: shells, scripts, servers
def test_the_served_documentation_is_ready_once_it_says_its_address(tmp_path: Path) -> None:
    served = long_running("scaler --docs try --serve 8765", tmp_path)
    assert served is not None and not served.terminal
    assert not served.ready("")
    assert served.ready("scaler: the documentation at http://127.0.0.1:8765/try/index.html (Ctrl-C stops)\n")
    assert long_running("scaler --docs try", tmp_path) is None  # prints the page's text and ends


def test_a_failing_command_and_a_bad_toml_fail_their_steps(tmp_path: Path) -> None:
    run = page_run(tmp_path)
    failing, toml = page_steps("page.md", "```bash\ntrue\nfalse\n```\n\n```toml\n[a\n```\n")
    assert run.run(failing).outcome == "failed"
    assert run.run(toml).outcome == "failed"


@pytest.mark.integration  # it runs the steps: shells, scripts, servers
def test_a_long_running_command_is_ready_then_stopped_by_ctrl_c(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    page = (
        f"```bash\nscaler_object_storage_server {address} --insecure\n```\n\n"
        f'<!-- doc-test: ctrl-c command="scaler_object_storage_server {address} --insecure" -->\n'
        f'<!-- doc-test: ctrl-c command="scaler_object_storage_server {address} --insecure" -->\n'
    )
    start, stop, again = page_steps("page.md", page)
    run = page_run(tmp_path)
    assert run.run(start).outcome == "ran"
    (running,) = run.background
    assert "listening on" in running.output() and running.process.poll() is None
    assert run.run(stop).outcome == "ran"
    assert running.process.poll() is not None
    result = run.run(again)
    assert result.outcome == "failed" and "the page started no such command" in result.detail
    assert run.finish() == []
