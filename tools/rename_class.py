"""Rename a class everywhere it is used: `python3 tools/rename_class.py MODULE OLD NEW [--dry-run]`.

MODULE is the dotted module that defines OLD (`scaler.protocol.processor_protocol`). Renamed, in every Python file
below `scaler`, `tests`, `benchmarks` and `tools`:
- in MODULE itself, every name OLD (not an attribute of something else);
- in a file that imports OLD from MODULE (or from any module that imports it from there, which re-exports it),
  the imported name and every use of it (an import `OLD as ALIAS` keeps its alias);
- in a file that imports MODULE itself (`from scaler.protocol import processor_protocol as pp`), every `pp.OLD`;
- an `__all__` entry "OLD" where OLD was imported; and `OLD` in backticks in docstrings and comments of those files.
In docs/*.md, `basename.OLD` (the module's last part, then the name) is renamed; other mentions are printed for a
reader to judge. Prints every file it changes (`--dry-run`: would change). Run from the project root.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ROOTS = ("scaler", "tests", "benchmarks", "tools")


def module_of(path: Path) -> str:
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def bindings(
    tree: ast.AST, path: Path, modules: set[str], old: str
) -> tuple[set[str], set[str], set[tuple[int, int]]]:
    """(local names bound to the class, local names bound to a module that has it as an attribute, the places of
    imports of another class named OLD)."""
    names: set[str] = set()
    foreign: set[tuple[int, int]] = set()
    module_aliases: set[str] = set()
    here = module_of(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + (1 if path.name == "__init__.py" else 0)]
                source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                if source in modules and alias.name == old:
                    names.add(alias.asname or old)
                elif alias.name == old:  # another class of the same name, imported under an alias: not ours
                    foreign.add((alias.lineno, alias.col_offset))
                if f"{source}.{alias.name}" in modules:
                    module_aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules and alias.asname:
                    module_aliases.add(alias.asname)
    return names, module_aliases, foreign


def rename_source(
    text: str, rename_bare: set[str], module_aliases: set[str], foreign: set[tuple[int, int]], old: str, new: str
) -> str:
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    out = []
    backticked = re.compile(rf"`([\w.]*\.)?{re.escape(old)}\b")
    for index, token in enumerate(tokens):
        string = token.string
        previous = tokens[index - 1].string if index else ""
        before_previous = tokens[index - 2].string if index > 1 else ""
        if token.type == tokenize.NAME and string == old:
            if token.start in foreign:
                pass
            elif previous != "." and old in rename_bare:
                string = new
            elif previous == "." and before_previous in module_aliases:
                string = new
        elif token.type == tokenize.STRING and string.strip("'\"") == old and old in rename_bare:
            string = string.replace(old, new)
        elif token.type in (tokenize.STRING, tokenize.COMMENT) and (old in rename_bare or module_aliases):
            string = backticked.sub(lambda match: f"`{match.group(1) or ''}{new}", string)
        out.append(token._replace(string=string))
    return tokenize.untokenize(out) if out != tokens else text


def main(argv: list[str]) -> int:
    dry_run = "--dry-run" in argv
    module, old, new = [arg for arg in argv[1:] if arg != "--dry-run"]
    # the module, and the packages that re-export the name from it
    modules = {module}
    changed = True
    files = [path for root in ROOTS if Path(root).is_dir() for path in sorted(Path(root).rglob("*.py"))]
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in files}
    while changed:
        changed = False
        for path, tree in trees.items():
            if module_of(path) not in modules:  # a module that imports the class can be imported from too
                names, _aliases, _foreign = bindings(tree, path, modules, old)
                if old in names:
                    modules.add(module_of(path))
                    changed = True
    for path, tree in trees.items():
        names, aliases, foreign = bindings(tree, path, modules, old)
        if module_of(path) == module:
            names.add(old)
        if old not in names and not aliases:
            continue
        text = path.read_text(encoding="utf-8")
        renamed = rename_source(text, {old} if old in names else set(), aliases, foreign, old, new)
        if renamed != text:
            print(("would change " if dry_run else "changed ") + str(path))
            if not dry_run:
                path.write_text(renamed, encoding="utf-8")
    basename = module.rsplit(".", 1)[-1]
    for path in sorted(Path("docs").rglob("*.md")) if Path("docs").is_dir() else []:
        text = path.read_text(encoding="utf-8")
        renamed = re.sub(rf"\b{re.escape(basename)}\.{re.escape(old)}\b", f"{basename}.{new}", text)
        if renamed != text:
            print(("would change " if dry_run else "changed ") + str(path))
            if not dry_run:
                path.write_text(renamed, encoding="utf-8")
        for number, line in enumerate(renamed.splitlines(), start=1):
            if re.search(rf"`{re.escape(old)}\b", line):
                print(f"check {path}:{number}: {line.strip()[:100]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
