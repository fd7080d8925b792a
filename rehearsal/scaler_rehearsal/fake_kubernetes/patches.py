"""The three patch types the API server takes: JSON merge patch (RFC 7386), strategic merge patch (lists of the
kinds here merged by their keys, with the `$patch`, `$retainKeys`, `$deleteFromPrimitiveList` and
`$setElementOrder` directives kubectl sends) and JSON patch (RFC 6902). A patch that cannot apply is a
`PatchError` (the server answers 422, or 400 for a malformed one)."""

from __future__ import annotations

import copy
from typing import Any

#: List fields merged element by element in a strategic merge patch, by the key that identifies an element.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "imagePullSecrets": "name",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}


class PatchError(ValueError):
    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, `null` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {key: copy.deepcopy(value) for key, value in patch.items() if key != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field) or [] if item not in value]
        else:
            _patch_field(result, key, value)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {key: value for key, value in result.items() if key in retain}
    return result


def _patch_field(result: dict[str, Any], key: str, value: Any) -> None:
    if value is None:
        result.pop(key, None)
    elif isinstance(value, list) and key in MERGE_KEYS:
        result[key] = _merge_list(result.get(key) or [], value, MERGE_KEYS[key])
    elif isinstance(value, list) and key == "ports":
        with_container_port = any("containerPort" in item for item in value if isinstance(item, dict))
        result[key] = _merge_list(result.get(key) or [], value, "containerPort" if with_container_port else "port")
    elif isinstance(value, dict):
        merged = strategic_merge_patch(result.get(key), value)
        if merged is None:
            result.pop(key, None)
        else:
            result[key] = merged
    else:
        result[key] = copy.deepcopy(value)


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    result = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            result.append(copy.deepcopy(item))
            continue
        index = next((i for i, old in enumerate(result) if isinstance(old, dict) and old.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


# ---------------------------------------------------------------- RFC 6902


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}", 400)
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _walk(document: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(document, dict) and part in document:
            document = document[part]
        elif isinstance(document, list) and part.isdigit() and int(part) < len(document):
            document = document[int(part)]
        else:
            raise PatchError(f"doc is missing path: /{'/'.join(parts)}")
    return document


def _add(document: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _walk(document, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        index = len(parent) if last == "-" else int(last) if last.isdigit() else -1
        if not 0 <= index <= len(parent):
            raise PatchError(f"add operation does not apply: index {last} out of range")
        parent.insert(index, value)
    else:
        raise PatchError(f"doc is missing path: /{'/'.join(parts)}")
    return document


def _remove(document: Any, parts: list[str]) -> Any:
    parent = _walk(document, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise PatchError(f"unable to remove nonexistent key: {last}: missing value")


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch", 400)
    document = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise PatchError("a JSON patch operation needs op and path", 400)
        op, parts = operation["op"], _pointer(operation["path"])
        if op == "add":
            document = _add(document, parts, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            _remove(document, parts)
        elif op == "replace":
            _walk(document, parts)
            if parts:
                _remove(document, parts)
            document = _add(document, parts, copy.deepcopy(operation.get("value")))
        elif op in ("move", "copy"):
            source = _pointer(operation.get("from", ""))
            value = _remove(document, source) if op == "move" else copy.deepcopy(_walk(document, source))
            document = _add(document, parts, value)
        elif op == "test":
            if _walk(document, parts) != operation.get("value"):
                raise PatchError(f"testing value /{'/'.join(parts)} failed: test failed")
        else:
            raise PatchError(f"Unexpected kind: {op}", 400)
    return document
