"""The commands the README and the guide give for a local folder name it so that pip cannot take it for a project
of the package index."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pip_wheel_of_the_clone_is_written_with_a_path_pip_reads_as_a_folder() -> None:
    """issue 60: `pip wheel ... path/to/your/clone`, typed with a bare folder name (`scaler`), built a same-named
    project fetched from the package index; `./` (or any path with a slash) is a folder for pip. Checked to fail
    on the README as it was."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
    commands = [
        (page.name, match.group(0)) for page in pages for match in re.finditer(r"pip wheel [^`\n]*", page.read_text())
    ]
    assert commands, "the README gives the command"
    targets = [(page, command, target) for page, command in commands for target in _folders(command)]
    assert [
        (page, command)
        for page, command, target in targets
        if target != "." and not target.startswith(("./", "/", "~"))
    ] == []


def _folders(command: str) -> list[str]:
    """The folders a `pip wheel` command builds: its words that are neither an option nor an option's value (the
    product's clone and its rehearsals' folder: `./ ./rehearsal/`)."""
    words = command.split()[2:]
    taking = {"--wheel-dir", "-w"}
    return [word for index, word in enumerate(words) if not word.startswith("-") and words[index - 1] not in taking]
