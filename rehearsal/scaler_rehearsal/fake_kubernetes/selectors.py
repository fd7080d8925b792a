"""Label selectors (`app=web,tier!=db,env in (a,b),!legacy`) and field selectors (`status.phase=Running`), parsed
and matched as the API server does; a selector it cannot parse, or a field it does not index, is a `SelectorError`
(answered 400 BadRequest with these words)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Object = dict[str, Any]


class SelectorError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  #: = != in notin exists !  # codespell:ignore notin
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "=":
            return present and value == self.values[0]
        if self.operator == "!=":
            return not present or value != self.values[0]
        if self.operator == "in":
            return present and value in self.values
        if self.operator == "notin":  # codespell:ignore notin
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        return not present  # "!"


_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^()]*)\)\s*$")  # codespell:ignore notin
_EQUALITY = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split(text: str) -> list[str]:
    """Split at the commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def parse_label_selector(text: str | None) -> tuple[Requirement, ...]:
    if not text or not text.strip():
        return ()
    requirements = []
    for part in _split(text):
        if match := _SET.match(part):
            values = tuple(value.strip() for value in match.group(3).split(",") if value.strip())
            if not values:
                raise SelectorError(
                    f"unable to parse requirement: for '{match.group(2)}' operator, values set can't be empty"
                )
            requirements.append(Requirement(match.group(1), match.group(2), values))
        elif match := _EQUALITY.match(part):
            operator = "=" if match.group(2) in ("=", "==") else "!="
            requirements.append(Requirement(match.group(1), operator, (match.group(3),)))
        elif match := _EXISTS.match(part):
            requirements.append(Requirement(match.group(2), "!" if match.group(1) else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: found '{part.strip()}', expected: identifier")
    return tuple(requirements)


def labels_match(requirements: tuple[Requirement, ...], obj: Object) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(requirement.matches(labels) for requirement in requirements)


# ---------------------------------------------------------------- field selectors


def _path(*keys: str) -> Callable[[Object], str]:
    def get(obj: Object) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            return ""
        return str(value).lower() if isinstance(value, bool) else str(value)

    return get


_COMMON = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}
#: The fields each kind can be selected by (the real server's field label conversions).
FIELDS: dict[str, dict[str, Callable[[Object], str]]] = {
    "pods": {
        **_COMMON,
        **{
            f"spec.{name}": _path("spec", name)
            for name in ("nodeName", "restartPolicy", "schedulerName", "serviceAccountName", "hostNetwork")
        },
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "events": {
        **_COMMON,
        **{
            f"involvedObject.{name}": _path("involvedObject", name)
            for name in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        },
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "secrets": {**_COMMON, "type": _path("type")},
    "nodes": {**_COMMON, "spec.unschedulable": _path("spec", "unschedulable")},
    "namespaces": {**_COMMON, "status.phase": _path("status", "phase")},
}


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    get: Callable[[Object], str]
    is_equal: bool
    value: str

    def matches(self, obj: Object) -> bool:
        return (self.get(obj) == self.value) is self.is_equal


def parse_field_selector(text: str | None, plural: str) -> tuple[FieldRequirement, ...]:
    if not text or not text.strip():
        return ()
    known = FIELDS.get(plural, _COMMON)
    requirements = []
    for part in text.split(","):
        match = re.match(r"^\s*([^!=\s]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if match is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, operator, value = match.groups()
        if field not in known:
            options = ", ".join(f'"{name}"' for name in known)
            raise SelectorError(f'"{field}" is not a known field selector: only {options}')
        requirements.append(FieldRequirement(known[field], operator != "!=", value))
    return tuple(requirements)


def fields_match(requirements: tuple[FieldRequirement, ...], obj: Object) -> bool:
    return all(requirement.matches(obj) for requirement in requirements)
