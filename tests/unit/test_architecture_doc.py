"""The modules and names docs/architecture.md points a reader to exist: every backticked dotted reference into a
package of `scaler` (`security.key_folder.user_keys`, `scaler.io.sockets`) names a module of the tree and, past
it, a name that module defines (checked by hand: the page still named `io.default_security.server_security`,
`io.key_folder.user_keys`, `io.stack_keys` and `io.curve.AuthorizedFolder` after the keys moved to
`scaler/security/`, and this test failed naming the four)."""

from __future__ import annotations

import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
PAGE = REPOSITORY / "docs" / "architecture.md"
PACKAGE = REPOSITORY / "scaler"
FILE_SUFFIXES = {"md", "py", "capnp", "toml", "txt", "json"}


def _module_source(parts: list[str]) -> tuple[str, list[str]] | None:
    """The source of the longest module (or package) the parts start with, and the parts left past it."""
    for end in range(len(parts), 0, -1):
        path = PACKAGE.joinpath(*parts[:end])
        if path.with_suffix(".py").is_file():
            return path.with_suffix(".py").read_text(), parts[end:]
        if (path / "__init__.py").is_file():
            return (path / "__init__.py").read_text(), parts[end:]
    return None


def unresolved_references(page: str) -> list[str]:
    packages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    missing = []
    for reference in sorted(set(re.findall(r"`((?:scaler\.)?[a-z_]+(?:\.[A-Za-z_]+)+)`", page))):
        parts = reference.split(".")
        parts = parts[1:] if parts[0] == "scaler" else parts
        if parts[0] not in packages or parts[-1] in FILE_SUFFIXES:
            continue  # a name of another library, or a file (`protocol.md`)
        found = _module_source(parts)
        if found is None:
            missing.append(reference)
            continue
        source, rest = found
        if rest and re.search(rf"^\s*(?:async def|def|class) {rest[0]}\b|^\s*{rest[0]}\b\s*[:=]", source, re.M) is None:
            missing.append(reference)
    return missing


def test_every_module_and_name_the_architecture_page_names_exists() -> None:
    missing = unresolved_references(PAGE.read_text())
    assert missing == [], f"docs/architecture.md names modules or names that scaler does not have: {missing}"
