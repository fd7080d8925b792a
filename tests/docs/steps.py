"""The steps of a documentation page, read from its markdown: what a reader types or saves, in the page's order.

A step is a fenced block (or an action the prose asks for):

- ```` ```bash ```` (also `sh`, `shell`, `console`): shell commands, one per line (a line ending in `\\` goes on
  with the next; comment lines are skipped; a line ending in `&` runs in the background);
- ```` ```python ```` or ```` ```py ````: a script to run, except a block whose first line names a file
  (`# helpers.py`): that one is a file the reader saves, under that name, for the steps after it;
- ```` ```toml ````: a file; its first line names it (`# stack.toml`), otherwise it is only checked to be TOML.

Other blocks (JSON, output samples, plain ```` ``` ````) are not steps. An HTML comment, which a reader of the
rendered page does not see, can say what the tier must know:

- `<!-- doc-test: skip reason="needs a real AWS account" -->`: the next block is not run (the reason is required
  and printed with the page's counts);
- `<!-- doc-test: timeout seconds="300" -->`: the next block may take that long (default: DEFAULT_TIMEOUT_SECONDS);
- `<!-- doc-test: ctrl-c command="scaler aws_ecs.toml" -->`: where the prose says to stop a command with Ctrl-C, a
  step that interrupts the background command of that text and checks that it stops.

A comment starting `doc-test:` that says anything else is an error of the page, as is a skip without a reason.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from enum import Enum

DEFAULT_TIMEOUT_SECONDS = 180.0
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
PYTHON_LANGUAGES = frozenset({"python", "py", "python3"})
TOML_LANGUAGES = frozenset({"toml"})

_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<body>.*?)\s*-->\s*$")
_FILE_NAME = re.compile(r"^#\s*(?P<name>[\w.\-/]+\.(?:py|toml))\b")


class Kind(Enum):
    SHELL = "shell"
    PYTHON = "python"
    FILE = "file"
    TOML = "toml"
    CTRL_C = "ctrl-c"


class PageError(ValueError):
    """The page's markup says something the tier cannot follow (a directive it does not know, a skip without a
    reason, a fence left open)."""


@dataclass(frozen=True)
class Step:
    page: str
    line: int  #: the line of the fence (or of the directive) in the page, from 1
    kind: Kind
    text: str  #: the block's content; for CTRL_C, the command to interrupt
    file_name: str | None = None  #: where a FILE or TOML step is saved, relative to the page's folder
    skip_reason: str | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    commands: tuple[str, ...] = field(default=())  #: for SHELL: the logical command lines

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line} ({self.kind.value})"


def page_steps(page: str, markdown: str) -> list[Step]:
    """Every step of the page, in order; raises PageError for markup the tier cannot follow."""
    steps: list[Step] = []
    pending: dict[str, dict[str, str]] = {}  # directives waiting for the next block
    lines = markdown.splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        directive = _DIRECTIVE.match(line)
        if directive is not None:
            verb, attributes = _parse_directive(page, number + 1, directive.group("body"))
            if verb == "ctrl-c":
                steps.append(Step(page, number + 1, Kind.CTRL_C, _required(page, number + 1, attributes, "command")))
            else:
                pending[verb] = attributes
            number += 1
            continue
        opening = _FENCE.match(line)
        if opening is None:
            number += 1
            continue
        body, end = _fenced_body(page, lines, number, opening)
        language = opening.group("info").lower()
        step = _step_of(page, number + 1, language, body, pending)
        if step is not None:
            steps.append(step)
            pending = {}
        elif pending:
            raise PageError(f"{page}:{number + 1}: a doc-test directive before a ```{language} block (not a step)")
        number = end + 1
    if pending:
        raise PageError(f"{page}: a doc-test directive ({', '.join(pending)}) with no block after it")
    return steps


def shell_commands(body: str) -> tuple[str, ...]:
    """The logical command lines of a shell block: continued lines joined, blank and comment lines left out."""
    commands: list[str] = []
    current = ""
    for raw in body.splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        text = raw.strip() if current else raw.rstrip()
        if text.endswith("\\"):
            current += text[:-1].rstrip() + " "
            continue
        commands.append((current + text).strip())
        current = ""
    if current.strip():
        commands.append(current.strip())
    return tuple(commands)


def _step_of(page: str, line: int, language: str, body: str, pending: dict[str, dict[str, str]]) -> Step | None:
    if language in SHELL_LANGUAGES:
        kind, file_name = Kind.SHELL, None
    elif language in PYTHON_LANGUAGES:
        named = _FILE_NAME.match(body)
        kind, file_name = (Kind.FILE, named.group("name")) if named else (Kind.PYTHON, None)
    elif language in TOML_LANGUAGES:
        named = _FILE_NAME.match(body)
        kind, file_name = Kind.TOML, (named.group("name") if named else None)
    else:
        return None
    skip = pending.get("skip")
    timeout = pending.get("timeout")
    return Step(
        page=page,
        line=line,
        kind=kind,
        text=body,
        file_name=file_name,
        skip_reason=None if skip is None else _required(page, line, skip, "reason"),
        timeout_seconds=DEFAULT_TIMEOUT_SECONDS
        if timeout is None
        else float(_required(page, line, timeout, "seconds")),
        commands=shell_commands(body) if kind is Kind.SHELL else (),
    )


def _fenced_body(page: str, lines: list[str], start: int, opening: re.Match[str]) -> tuple[str, int]:
    fence, indent = opening.group("fence"), len(opening.group("indent"))
    for end in range(start + 1, len(lines)):
        if lines[end].strip().startswith(fence[0] * len(fence)) and not lines[end].strip().strip(fence[0]):
            body = [text[indent:] if text[:indent].strip() == "" else text for text in lines[start + 1 : end]]
            return "".join(f"{text}\n" for text in body), end
    raise PageError(f"{page}:{start + 1}: a {fence} fence that is never closed")


_VERBS = {"skip": ("reason",), "timeout": ("seconds",), "ctrl-c": ("command",)}


def _parse_directive(page: str, line: int, body: str) -> tuple[str, dict[str, str]]:
    try:
        words = shlex.split(body)
    except ValueError as error:
        raise PageError(f"{page}:{line}: cannot read the doc-test directive {body!r}: {error}") from None
    if not words or words[0] not in _VERBS:
        raise PageError(f"{page}:{line}: unknown doc-test directive {body!r} (known: {', '.join(_VERBS)})")
    attributes: dict[str, str] = {}
    for word in words[1:]:
        key, equals, value = word.partition("=")
        if not equals or key not in _VERBS[words[0]]:
            takes = ", ".join(f'{key}="..."' for key in _VERBS[words[0]])
            raise PageError(f"{page}:{line}: doc-test {words[0]} takes {takes}, not {word!r}")
        attributes[key] = value
    return words[0], attributes


def _required(page: str, line: int, attributes: dict[str, str], key: str) -> str:
    value = attributes.get(key, "").strip()
    if not value:
        raise PageError(f'{page}:{line}: the doc-test directive needs a non-empty {key}="..."')
    return value
