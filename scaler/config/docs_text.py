"""A page of the documentation as text for a terminal (`scaler --docs NAME`): what its Markdown says, without the
markup a terminal shows as noise. Headings keep their `#`s (they read as headings), paragraphs and list items are
wrapped to the width, code is indented, tables stay Markdown's (they read as tables); a link to another page names
the command that prints it, raw HTML is its text, the documentation tier's comments are dropped, and a toctree is
the list of its pages.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

from scaler.config.markdown_blocks import Block, BlockKind, blocks

WIDTH = 100

_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]*)\)")
_TAG = re.compile(r"<[^>]+>")


def page_as_text(name: str, markdown: str, title_of: Callable[[str], str]) -> str:
    """The page `name` (its path under docs/ without `.md`) as terminal text; `title_of(page)` gives another page's
    title (for a toctree)."""
    parts = [_block_text(name, block, title_of) for block in blocks(markdown)]
    return "\n\n".join(part for part in parts if part) + "\n"


def _block_text(name: str, block: Block, title_of: Callable[[str], str]) -> str:
    if block.kind is BlockKind.HEADING:
        return f"{'#' * block.level} {inline_text(name, block.text)}"
    if block.kind is BlockKind.PARAGRAPH:
        return textwrap.fill(inline_text(name, block.text), WIDTH)
    if block.kind is BlockKind.HTML:
        return textwrap.fill(" ".join(_TAG.sub("", block.text).split()), WIDTH)
    if block.kind is BlockKind.LIST:
        return "\n".join(_item_text(name, item.depth, item.numbered, index, item.text)
                         for index, item in enumerate(block.items, 1))  # fmt: skip
    if block.kind is BlockKind.TABLE:
        return "\n".join("| " + " | ".join(inline_text(name, cell) for cell in row) + " |" for row in block.rows)
    if block.kind is BlockKind.TOCTREE:
        folder = name.rpartition("/")[0]
        pages = [f"{folder}/{entry}" if folder else entry for entry in block.entries]
        width = max((len(page) for page in pages), default=0)
        lines = [f"{block.options.get('caption', 'Pages')}:"]
        lines += [f"    scaler --docs {page:<{width}}  {title_of(page)}" for page in pages]
        return "\n".join(lines)
    return textwrap.indent(block.text, "    ")


def _item_text(name: str, depth: int, numbered: bool, index: int, text: str) -> str:
    bullet = f"{index}." if numbered else "-"
    indent = "  " * depth
    return textwrap.fill(inline_text(name, text), WIDTH, initial_indent=f"{indent}{bullet} ",
                         subsequent_indent=indent + " " * (len(bullet) + 1))  # fmt: skip


def inline_text(name: str, text: str) -> str:
    """A line's Markdown as text: links to pages name `scaler --docs PAGE`, others their address; emphasis and HTML
    tags dropped."""

    def link(match: re.Match[str]) -> str:
        picture, label, target = match.groups()
        if picture:
            return f"[picture: {label}]"
        page = page_of_link(name, target)
        if page is not None:
            return f"{label} (`scaler --docs {page}`)" if page != name else label
        return label if target.startswith("#") else f"{label} ({target})"

    text = _LINK.sub(link, text)
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", text)
    return _TAG.sub("", text)


def page_of_link(name: str, target: str) -> str | None:
    """The page a link of page `name` leads to (`../scaling.md#x` from `guide/bursting` is `scaling`); None when it
    leads elsewhere (a web address, a picture, an anchor of the same page)."""
    path = target.partition("#")[0]
    if not path.endswith(".md") or "://" in path:
        return None
    parts = name.split("/")[:-1]
    for part in path[:-3].split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)
