"""The documentation that ships with the package (`scaler --docs [NAME]`), so that a help text or an error can point
a pip user to a page they have: the repository's `docs/*.md` and `docs/guide/*.md`, packaged from `scaler/docs`
(a symbolic link to the repository's `docs/`, as `config/` is one to the example files).

A page is named by its path under docs/ without `.md` (`scaling`, `guide/bursting`); a guide page also by its
file name alone when no reference page has that name (`bursting`; `security` is docs/security.md).
"""

from __future__ import annotations

import difflib
import sys
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importlib.abc's name is deprecated from Python 3.12 (an error under the suite's -W error)
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

from scaler.config.doc_values import fill
from scaler.config.toml_file import ConfigError

#: The package folder of the pages (relative to the `scaler` package).
DOCS_FOLDER = "docs"


def docs_root() -> Traversable:
    return resources.files("scaler") / DOCS_FOLDER


def page_names() -> list[str]:
    """Every page that ships: the reference pages, then the guide's."""
    root = docs_root()
    names: list[str] = []
    for folder, prefix in ((root, ""), (root / "guide", "guide/")):
        if folder.is_dir():
            names += sorted(prefix + entry.name[:-3] for entry in folder.iterdir() if entry.name.endswith(".md"))
    return names


def find_page(name: str) -> str:
    """The page called `name` (`scaling`, `guide/bursting`, `bursting`, with or without `docs/` and `.md`);
    ConfigError naming the closest one otherwise."""
    wanted = name.strip().removeprefix("docs/").removesuffix(".md")
    names = page_names()
    for candidate in (wanted, f"guide/{wanted}"):
        if candidate in names:
            return candidate
    close = difflib.get_close_matches(wanted, names + [page.removeprefix("guide/") for page in names], n=1)
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    raise ConfigError(f"no page called {name!r}{hint}; `scaler --docs` lists them")


def page_text(name: str) -> str:
    """The Markdown of a page, as it ships, with the settings' defaults it names filled in (`doc_values.fill`)."""
    return fill((docs_root() / f"{find_page(name)}.md").read_text(encoding="utf-8"))


def page_for_terminal(name: str) -> str:
    """What `scaler --docs NAME` prints: the page as text for a terminal (`docs_text`)."""
    from scaler.config.docs_text import page_as_text

    return page_as_text(find_page(name), page_text(name), page_title)


def docs_listing(prog: str) -> str:
    """What `scaler --docs` prints: every page with its title."""
    lines = [f"The documentation installed with scaler; `{prog} --docs NAME` prints a page, e.g.:", ""]
    lines += [f"    {prog} --docs guide/quick_start | less", ""]
    names = page_names()
    width = max((len(name) for name in names), default=0)
    for name in names:
        lines.append(f"  {name:<{width}}  {page_title(name)}")
    return "\n".join(lines)


def page_title(name: str) -> str:
    """A page's title: its first heading."""
    for line in (docs_root() / f"{find_page(name)}.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""
