"""Apply the renames of `tools/class_renames.txt`: `python3 tools/apply_class_renames.py [--skip-files LIST] [--dry-run]`.

Each line of the list is `module old new` (see tools/rename_class.py for what a rename changes). `--skip-files LIST`
(a file of paths, one a line) leaves out every rename that would change one of them: the renames that touch files
other branches are editing wait for those branches to land. A rename already applied changes nothing, so the list can
be applied again. Prints what each rename changes, and which it skipped. Then run
`ruff check --fix --select I scaler tests benchmarks && ruff format scaler tests benchmarks`. Run from the project root.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def renames() -> list[tuple[str, str, str]]:
    lines = (HERE / "class_renames.txt").read_text(encoding="utf-8").splitlines()
    rows = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    return [(module, old, new) for module, old, new in rows]


def changes(module: str, old: str, new: str, dry_run: bool) -> list[str]:
    command = [sys.executable, str(HERE / "rename_class.py"), module, old, new, *(["--dry-run"] if dry_run else [])]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return output.splitlines()


def main(argv: list[str]) -> int:
    dry_run = "--dry-run" in argv
    skip: set[str] = set()
    if "--skip-files" in argv:
        skip = set(Path(argv[argv.index("--skip-files") + 1]).read_text(encoding="utf-8").split())
    for module, old, new in renames():
        planned = changes(module, old, new, dry_run=True)
        touched = {line.split()[-1] for line in planned if line.startswith("would change")}
        blocked = sorted(touched & skip)
        if blocked:
            print(f"skipped {module}.{old} -> {new}: touches {', '.join(blocked)}")
            continue
        print(f"{module}.{old} -> {new}")
        for line in planned if dry_run else changes(module, old, new, dry_run=False):
            print(f"    {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
