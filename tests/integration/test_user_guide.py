"""Every example of the user guide (docs/guide/*.md) runs as it is, and prints what the guide says it prints.

A block fenced `python` is run in a fresh interpreter; for each `print(...)  # shown` line whose comment has no
`...`, the comment must be a line of the output. Blocks fenced `py` are fragments (they need Dask, Ray, a
running cluster or an AWS account) and are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHOWN = re.compile(r"print\(.*\)\s+#\s*(.+)$")


def examples() -> list[tuple[str, str]]:
    found = []
    for page in sorted(GUIDE.glob("*.md")):
        for number, match in enumerate(BLOCK.finditer(page.read_text()), start=1):
            found.append((f"{page.stem}-{number}", match.group(1)))
    return found


def expected_lines(code: str) -> list[str]:
    shown = [match.group(1).strip() for line in code.splitlines() if (match := SHOWN.search(line))]
    return [text for text in shown if "..." not in text]


def test_the_guide_has_examples() -> None:
    assert len(examples()) >= 10


@pytest.mark.parametrize(("name", "code"), examples(), ids=[name for name, _ in examples()])
def test_a_guide_example_runs_and_prints_what_the_guide_says(name: str, code: str, tmp_path: Path) -> None:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    # as in an activated virtual environment: its commands on the PATH; a stack's keys in a folder of the test
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    environment = {**os.environ, "PATH": path, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    finished = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=150, cwd=tmp_path,
        stdin=subprocess.DEVNULL, env=environment,
    )  # fmt: skip
    assert finished.returncode == 0, f"{name} failed:\n{finished.stderr[-3000:]}"
    lines = [line.strip() for line in finished.stdout.splitlines()]
    for expected in expected_lines(code):
        assert expected in lines, f"{name}: the guide says it prints {expected!r}; it printed:\n{finished.stdout}"
