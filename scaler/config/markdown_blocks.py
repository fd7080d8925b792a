"""The Markdown of the pages that ship (`installed_docs`), read as blocks: what the terminal text (`docs_text`) and
the site the package renders (`docs_site`) are made from. Stdlib only, and only what the pages use: headings,
paragraphs, lists (nested by indentation), tables, fenced code (MyST's ```` ```{toctree} ```` among them), HTML
comments (the documentation tier's directives: never shown) and lines of raw HTML.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum


class BlockKind(Enum):
    HEADING = "heading"
    PARAGRAPH = "paragraph"
    LIST = "list"
    TABLE = "table"
    CODE = "code"
    TOCTREE = "toctree"
    HTML = "html"


@dataclass(frozen=True)
class Item:
    """One item of a list: its depth (0 for the outermost), whether it is numbered, its text (lines joined)."""

    depth: int
    numbered: bool
    text: str


@dataclass(frozen=True)
class Block:
    kind: BlockKind
    text: str = ""  #: a heading's or a paragraph's text; code; raw HTML
    level: int = 0  #: a heading's level
    info: str = ""  #: a code fence's language
    items: tuple[Item, ...] = ()  #: a list's
    rows: tuple[tuple[str, ...], ...] = ()  #: a table's, the header first (the separator row left out)
    options: dict[str, str] = field(default_factory=dict)  #: a toctree's (`:caption:`)
    entries: tuple[str, ...] = ()  #: a toctree's pages


_FENCE = re.compile(r"^(`{3,}|~{3,})\s*(\S*)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
_COMMENT_START = "<!--"


def blocks(text: str) -> list[Block]:
    """The page's blocks, in order."""
    lines = text.splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
        elif line.lstrip().startswith(_COMMENT_START):
            index = _skip_comment(lines, index)
        elif _FENCE.match(line):
            index = _fence(lines, index, found)
        elif (heading := _HEADING.match(line)) is not None:
            found.append(Block(BlockKind.HEADING, heading.group(2), level=len(heading.group(1))))
            index += 1
        elif line.lstrip().startswith("|"):
            index = _table(lines, index, found)
        elif _ITEM.match(line):
            index = _list(lines, index, found)
        elif line.lstrip().startswith("<") and not line.lstrip().startswith("<http"):
            end = _paragraph_end(lines, index)
            found.append(Block(BlockKind.HTML, "\n".join(lines[index:end])))
            index = end
        else:
            end = _paragraph_end(lines, index)
            found.append(Block(BlockKind.PARAGRAPH, " ".join(part.strip() for part in lines[index:end])))
            index = end
    return found


def _skip_comment(lines: list[str], index: int) -> int:
    while "-->" not in lines[index] and index + 1 < len(lines):
        index += 1
    return index + 1


def _fence(lines: list[str], index: int, found: list[Block]) -> int:
    match = _FENCE.match(lines[index])
    assert match is not None
    marker, info = match.group(1), match.group(2)
    end = index + 1
    while end < len(lines) and not lines[end].strip().startswith(marker):
        end += 1
    body = lines[index + 1 : end]
    if info == "{toctree}":
        pairs = (line[1:].partition(":") for line in body if line[:1] == ":")
        options = {key: value.strip() for key, _, value in pairs}
        entries = tuple(line.strip() for line in body if line.strip() and not line.startswith(":"))
        found.append(Block(BlockKind.TOCTREE, options=options, entries=entries))
    else:
        found.append(Block(BlockKind.CODE, "\n".join(body), info=info))
    return end + 1


def _table(lines: list[str], index: int, found: list[Block]) -> int:
    rows: list[tuple[str, ...]] = []
    while index < len(lines) and lines[index].lstrip().startswith("|"):
        cells = tuple(cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", lines[index].strip())[1:-1])
        if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):
            rows.append(cells)
        index += 1
    found.append(Block(BlockKind.TABLE, rows=tuple(rows)))
    return index


def _list(lines: list[str], index: int, found: list[Block]) -> int:
    items: list[Item] = []
    indents: list[int] = []
    while index < len(lines) and lines[index].strip():
        match = _ITEM.match(lines[index])
        if match is None:  # a continuation line of the item before
            previous = items[-1]
            items[-1] = Item(previous.depth, previous.numbered, f"{previous.text} {lines[index].strip()}")
        else:
            indent = len(match.group(1))
            while indents and indent < indents[-1]:
                indents.pop()
            if not indents or indent > indents[-1]:
                indents.append(indent)
            items.append(Item(len(indents) - 1, match.group(2)[0].isdigit(), match.group(3)))
        index += 1
        if index < len(lines) and not lines[index].strip() and _continues(lines, index + 1):
            index += 1  # a blank line between items of one list
    found.append(Block(BlockKind.LIST, items=tuple(items)))
    return index


def _continues(lines: list[str], index: int) -> bool:
    return index < len(lines) and _ITEM.match(lines[index]) is not None


def _paragraph_end(lines: list[str], index: int) -> int:
    end = index + 1
    while end < len(lines) and lines[end].strip() and not _starts_block(lines[end]):
        end += 1
    return end


def _starts_block(line: str) -> bool:
    stripped = line.lstrip()
    return bool(
        _FENCE.match(line) or _HEADING.match(line) or stripped.startswith(("|", _COMMENT_START)) or _ITEM.match(line)
    )


def slug(text: str, taken: dict[str, int]) -> str:
    """A heading's anchor as GitHub (and MyST's `myst_heading_anchors`) make it: lower case, punctuation dropped,
    spaces as hyphens; a repeat gets `-1`, `-2`, ... `taken` counts those made so far on the page."""
    plain = re.sub(r"[`*]|<[^>]+>", "", text)
    plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", plain)
    base = re.sub(r"[^\w\- ]", "", plain.strip().lower()).replace(" ", "-")
    count = taken.get(base, 0)
    taken[base] = count + 1
    return base if count == 0 else f"{base}-{count}"
