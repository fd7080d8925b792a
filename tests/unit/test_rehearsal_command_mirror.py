"""The machine's commands as a rehearsal's units see them (scaler_rehearsal.images): the folder of links is made once
per machine and shared, and another is made when the machine's commands change."""

from __future__ import annotations

import re
from pathlib import Path

from scaler_rehearsal.images import shared_mirror

HIDDEN = re.compile(r"^(python|pip)")


def _command(folder: Path, name: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_the_mirror_is_made_once_and_another_when_the_commands_change(tmp_path: Path) -> None:
    """Checked off: with a fresh folder made at each call, the second call's folder differs."""
    first, second = tmp_path / "usr-bin", tmp_path / "bin"
    for folder in (first, second):
        folder.mkdir()
    _command(first, "ls")
    _command(second, "ls")
    _command(first, "python3.11")
    (first / "notes.txt").write_text("not a command")
    cache = tmp_path / "cache"

    mirror = shared_mirror(cache, [str(first), str(second)], HIDDEN)
    assert sorted(path.name for path in mirror.iterdir()) == ["ls"]
    assert (mirror / "ls").readlink() == first / "ls", "the first folder's command of a name"
    assert shared_mirror(cache, [str(first), str(second)], HIDDEN) == mirror, "made once"

    _command(second, "tar")
    changed = shared_mirror(cache, [str(first), str(second)], HIDDEN)
    assert changed != mirror and sorted(path.name for path in changed.iterdir()) == ["ls", "tar"]
    assert sorted(path.name for path in cache.iterdir()) == sorted([mirror.name, changed.name]), "nothing half-made"
