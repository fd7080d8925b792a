"""Class names defined more than once in the package: `python3 tools/duplicate_class_names.py [ROOT]`.

Reads every module below ROOT (default `scaler`) with `ast`, collects the classes defined at any depth, and prints
each name defined in two or more places (`name: file:line, file:line`), then `duplicate class names: N` last.
Private names (a leading underscore) count too: a reader meets them as well. Run from the project root.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path


def class_definitions(root: Path) -> dict[str, list[str]]:
    places: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                places[node.name].append(f"{path}:{node.lineno}")
    return places


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "scaler")
    duplicated = {name: where for name, where in class_definitions(root).items() if len(where) > 1}
    for name in sorted(duplicated):
        print(f"{name}: {', '.join(duplicated[name])}")
    print(f"duplicate class names: {len(duplicated)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
