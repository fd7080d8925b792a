"""The scheduler's floors, counted: `python3 tools/scheduler_floors.py [--tree DIR]` from the project root.

The floors are the layers of pyproject.toml's contract "The scheduler's floors" (docs/architecture.md, "Layers"),
read from this checkout; the code read is `DIR/scaler/scheduler` (default: this checkout), so the same floors can be
counted on another tree (`git archive <commit> scaler | tar -x -C /tmp/tree`). Every import counts, those under
`if TYPE_CHECKING:` too: a module named only for its type hints is still a module the reader must know. Prints

- the modules of `scaler/scheduler` that are on no floor (each must be on one);
- the import cycles among `scaler/scheduler`'s modules, and how many files are in them;
- each import from a lower floor to a higher one;
- each place a registry reaches another registry: an import of its module, or an attribute of the core naming it
  (`core.actors.ready(...)`, `self._core.lifecycle.apply(...)`), the registries' attribute names read from
  `SchedulerCore.__init__` (`self.actors = Actors(...)`);

and a summary line of the four counts last. Exit status 1 when any count is not 0.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path

import tomllib

CONTRACT = "The scheduler's floors"
REGISTRY_FLOOR_NAME = "registries"
PACKAGE = "scaler.scheduler"


def floors_from(pyproject: Path) -> list[list[str]]:
    """The contract's layers, highest first, each a list of module names."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["name"].startswith(CONTRACT):
            return [[name.strip() for name in layer.replace("|", ":").split(":")] for layer in contract["layers"]]
    raise SystemExit(f"no import-linter contract named {CONTRACT!r} in {pyproject}")


def registry_floor(pyproject: Path) -> int:
    """The index of the registries' floor: the layer the contract "Registries import nothing of each other" lists."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract.get("type") == "independence" and "registries" in contract["name"].lower():
            registries = set(contract["modules"])
            for index, floor in enumerate(floors_from(pyproject)):
                if set(floor) == registries:
                    return index
            raise SystemExit("the registries' independence contract lists other modules than a floor of the layers")
    raise SystemExit("no independence contract for the registries in pyproject.toml")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(tree: ast.AST, name: str, is_package: bool) -> set[str]:
    """Every module this one imports (`from a import b` counts as a and, if it is a module, a.b)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def read_modules(tree_root: Path) -> dict[str, tuple[ast.AST, set[str]]]:
    package_dir = tree_root / Path(*PACKAGE.split("."))
    modules: dict[str, tuple[ast.AST, set[str]]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        name = module_name(tree_root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        modules[name] = (tree, imports_of(tree, name, path.name == "__init__.py"))
    return {name: (tree, {i for i in found if i in modules}) for name, (tree, found) in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def registry_attributes(core: ast.AST, class_modules: dict[str, str]) -> dict[str, str]:
    """`SchedulerCore.__init__`'s `self.<attribute> = <Class>(...)`: attribute -> the module of the class."""
    found: dict[str, str] = {}
    for node in ast.walk(core):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
            module = class_modules.get(node.value.func.id)
            for target in node.targets:
                if module and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    if target.value.id == "self":
                        found[target.attr] = module
    return found


def core_references(tree: ast.AST, attributes: dict[str, str]) -> list[tuple[int, str]]:
    """`core.<registry>` and `self._core.<registry>` in a module: (line, registry module) each."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr not in attributes:
            continue
        holder = node.value
        if (isinstance(holder, ast.Name) and holder.id == "core") or (
            isinstance(holder, ast.Attribute) and holder.attr == "_core"
        ):
            found.append((node.lineno, attributes[node.attr]))
    return found


def holding_core(modules: dict[str, tuple[ast.AST, set[str]]], names: set[str]) -> set[str]:
    """The modules among `names` with a class whose `__init__` takes the core (a parameter typed `SchedulerCore`)."""
    found = set()
    for name in names:
        for node in ast.walk(modules[name][0]):
            if isinstance(node, ast.FunctionDef) and node.name == "__init__":
                if any(
                    arg.annotation is not None and "SchedulerCore" in ast.unparse(arg.annotation)
                    for arg in node.args.args
                ):
                    found.add(name)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=Path("."), help="the tree whose scaler/scheduler is read")
    args = parser.parse_args()
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    floors = floors_from(pyproject)
    registry_index = registry_floor(pyproject)
    floor_of = {module: index for index, floor in enumerate(floors) for module in floor}
    modules = read_modules(args.tree)
    graph = {name: found - {name} for name, (_, found) in modules.items()}

    unplaced = sorted(name for name in modules if name not in floor_of and not name.endswith(("scheduler", "core")))
    for name in unplaced:
        print(f"on no floor: {name}")

    found_cycles = cycles(graph)
    for component in found_cycles:
        print(f"cycle of {len(component)}: {', '.join(component)}")
    in_cycles = sum(len(component) for component in found_cycles)

    upward = [
        (name, imported)
        for name, imported_set in sorted(graph.items())
        for imported in sorted(imported_set)
        if name in floor_of and imported in floor_of and floor_of[imported] < floor_of[name]
    ]
    for name, imported in upward:
        print(f"upward: {name} (floor {floor_of[name]}) imports {imported} (floor {floor_of[imported]})")

    registries = {module for module, index in floor_of.items() if index == registry_index and module in modules}
    class_modules = {
        node.name: name for name in registries for node in ast.walk(modules[name][0]) if isinstance(node, ast.ClassDef)
    }
    core_module = next((name for name in modules if name.endswith(".scheduler_core")), None)
    attributes = registry_attributes(modules[core_module][0], class_modules) if core_module else {}
    reaches: Counter[tuple[str, str]] = Counter()
    for name in sorted(registries):
        for imported in graph[name] & registries:
            reaches[(name, imported)] += 1
        for _, target in core_references(modules[name][0], attributes):
            if target != name:
                reaches[(name, target)] += 1
    by_source: dict[str, list[str]] = defaultdict(list)
    for (source, target), count in sorted(reaches.items()):
        by_source[source].append(f"{target.rsplit('.', 1)[-1]} x{count}")
    for source, targets in by_source.items():
        print(f"reaches: {source.rsplit('.', 1)[-1]} -> {', '.join(targets)}")

    total = sum(reaches.values())
    holding = holding_core(modules, registries | {name for name in modules if name.endswith(".view")})
    narrow = sum(count for (source, target), count in reaches.items() if source in holding and target in holding)
    narrow += sum(
        1
        for source in holding - registries
        for _, target in core_references(modules[source][0], attributes)
        if target in holding
    )
    print(f"of them between the modules whose classes hold the core ({len(holding)}): {narrow}")
    print(
        f"scheduler floors: {len(unplaced)} module(s) on no floor, {in_cycles} file(s) in import cycles, "
        f"{len(upward)} upward import(s), {total} registry-to-registry reference(s)"
    )
    return 1 if unplaced or in_cycles or upward or total else 0


if __name__ == "__main__":
    sys.exit(main())
