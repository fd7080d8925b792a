"""The documentation comments of a Cap'n Proto schema, read from its text (the compiled schema does not keep
them): a declaration's comment is the one at the end of its line and the comment lines right below it that are
indented further; a struct's or enum's is the comment lines right after its opening line."""

from __future__ import annotations

import re

_SCOPE = re.compile(r"^(?:struct|enum)\s+(\w+)\b.*\{$|^(\w+)\s*:\s*(?:union|group)\s*\{$|^(union)\s*\{$")
_DECLARATION = re.compile(r"^(?:const\s+)?(\w+)\s*(?:@\d+)?\s*(?::[^;]*)?;$")


def read_comments(text: str) -> dict[str, str]:
    """Comments by dotted path: `Task`, `Task.taskId`, `ResultStatus.hostLost`, `TaskBody.logForwarding.level`,
    `protocolVersion` (a constant). Members of an anonymous union belong to its struct; the union's own comment
    is `Task.union`."""
    comments: dict[str, str] = {}
    scopes: list[str] = []
    current: tuple[str, int] | None = None  # the declaration that comment lines below may continue
    for line in text.splitlines():
        code, _, comment = line.partition("#")
        indent = len(line) - len(line.lstrip())
        code, comment = code.strip(), comment.strip()
        if not code:
            if comment and current is not None and indent > current[1]:
                path = current[0]
                comments[path] = f"{comments[path]} {comment}".strip()
            elif not comment:
                current = None
            continue
        if code == "}":
            scopes.pop()
            current = None
            continue
        scope = _SCOPE.match(code)
        if scope is not None:
            name = scope.group(1) or scope.group(2) or ""
            scopes.append(name)
            current = (".".join(s for s in scopes if s) or "", indent)
            if not name:  # the anonymous union: its members belong to the struct
                current = (f"{current[0]}.union", indent)
            comments[current[0]] = comment
            continue
        declaration = _DECLARATION.match(code)
        if declaration is None:
            current = None
            continue
        path = ".".join([*(s for s in scopes if s), declaration.group(1)])
        comments[path] = comment
        current = (path, indent)
    return {path: comment for path, comment in comments.items() if comment}
