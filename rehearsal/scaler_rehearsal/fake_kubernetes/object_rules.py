"""What the API server does to an object on its way in or out, as pure functions of the objects: times as it writes
them, a request's body decoded into an object of its kind and placed in its namespace, the checks of its metadata
and of its kind, what an update or a patch may change (the status only through its subresource; uid, creation and
deletion times, namespace kept), deletion preconditions, and graceful deletion (a bound pod gets a deletionTimestamp
and stays until its kubelet saw its processes end; a namespace turns Terminating and empties first).

Rules: nothing here writes; the store decides what is written, under its lock. Functions return new dicts and never
change the objects they are given.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from scaler_rehearsal.fake_kubernetes import failures
from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.kinds import STATUS_SUBRESOURCE, Kind
from scaler_rehearsal.fake_kubernetes.patches import PatchError, json_patch, merge_patch, strategic_merge_patch
from scaler_rehearsal.fake_kubernetes.validation import metadata_problems, pod_update_problems, quantity_problem

Object = dict[str, Any]
PATCH_TYPES = {
    "application/merge-patch+json": merge_patch,
    "application/strategic-merge-patch+json": strategic_merge_patch,
    "application/json-patch+json": json_patch,
}
#: The taints the node lifecycle controller puts on a node whose Ready condition is False, or Unknown.
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
#: What an update keeps of the stored object's metadata, whatever the request says.
KEPT_METADATA = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "namespace",
    "generateName",
    "generation",
)


def timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def decoded(kind: Kind, body: Any) -> Object:
    """A request's body as an object of `kind` (a copy), or the 400 the server answers."""
    if not isinstance(body, dict):
        raise failures.bad_request(f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}')
    obj = copy.deepcopy(body)
    if obj.get("kind") not in (None, kind.kind) or obj.get("apiVersion") not in (None, kind.api_version):
        raise failures.bad_request(
            f"the API version in the data ({obj.get('apiVersion')}) does not match the expected API version "
            f"({kind.api_version})"
            if obj.get("kind") in (None, kind.kind)
            else f'{obj.get("kind")} in version "{kind.version}" cannot be handled as a {kind.kind}'
        )
    obj["kind"], obj["apiVersion"] = kind.kind, kind.api_version
    if kind.plural == "pods":
        for container in (obj.get("spec") or {}).get("containers") or []:
            problem = (
                quantity_problem((container or {}).get("resources") or {}) if isinstance(container, dict) else None
            )
            if problem:
                raise failures.bad_request(f'Pod in version "v1" cannot be handled as a Pod: {problem}')
    return obj


def place(kind: Kind, metadata: Object, namespace: str) -> None:
    """The object's namespace is the request's (none for a cluster-wide kind); another one is a 400."""
    if not kind.namespaced:
        metadata.pop("namespace", None)
        return
    if metadata.get("namespace") not in (None, "", namespace):
        raise failures.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    metadata["namespace"] = namespace


def check(kind: Kind, obj: Object) -> None:
    """Its metadata and its kind's own rules, as a 422 naming every problem."""
    errors = metadata_problems(obj["metadata"], kind.name_rule) + kind.validate(obj)
    if errors:
        raise failures.invalid(kind, str(obj["metadata"].get("name") or ""), errors)


def patch_applier(patch_type: str) -> Callable[[Any, Any], Any]:
    """How a patch of this Content-Type applies, or the 415 the server answers to a type it does not take."""
    apply = PATCH_TYPES.get(patch_type.split(";")[0].strip())
    if apply is None:
        raise ApiFailure(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(PATCH_TYPES),
        )
    return apply


def patched(kind: Kind, current: Object, apply: Callable[[Any, Any], Any], patch: Any) -> Object:
    """`current` with the patch applied (a 409 when the patch names an older resourceVersion)."""
    name = current["metadata"]["name"]
    try:
        result = apply(copy.deepcopy(current), patch)
    except PatchError as error:
        raise ApiFailure(error.code, "Invalid" if error.code == 422 else "BadRequest", str(error)) from None
    if not isinstance(result, dict):
        raise failures.bad_request("the patch did not produce an object")
    wanted = (patch.get("metadata") or {}).get("resourceVersion") if isinstance(patch, dict) else None
    if wanted and wanted != current["metadata"]["resourceVersion"]:
        raise failures.conflict(kind, name)
    result = decoded(kind, result)
    result.setdefault("metadata", {})["name"] = name
    return result


def updated(kind: Kind, current: Object, obj: Object, subresource: str) -> Object:
    """What an update of `current` with `obj` stores (with `current`'s resourceVersion still: the store gives it the
    next one, unless nothing changed)."""
    name = current["metadata"]["name"]
    if subresource == "status":
        new = copy.deepcopy(current)
        new["status"] = obj.get("status") or {}
    else:
        new = obj
        if kind.plural in STATUS_SUBRESOURCE:
            new["status"] = copy.deepcopy(current.get("status", {}))
        for field in KEPT_METADATA:
            if field in current["metadata"]:
                new["metadata"][field] = current["metadata"][field]
            else:
                new["metadata"].pop(field, None)
        kind.defaults(new)
        check(kind, new)
        if kind.plural == "pods":
            errors = pod_update_problems(current.get("spec") or {}, new.get("spec") or {})
            if errors:
                raise failures.invalid(kind, name, errors)
        if new.get("spec") != current.get("spec") and "generation" in current["metadata"]:
            new["metadata"]["generation"] = current["metadata"]["generation"] + 1
    new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return new


def default_tolerations(pod: Object, seconds: int) -> None:
    """The DefaultTolerationSeconds admission of a new pod: unless it tolerates them already, it tolerates its node
    being not ready or unreachable (the NoExecute taints of the node lifecycle controller) for `seconds` (300), after
    which the taint eviction controller deletes it."""
    tolerations = pod.setdefault("spec", {}).setdefault("tolerations", [])
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if not any(
            isinstance(t, dict) and t.get("key") in (None, "", key) and t.get("effect") in (None, "", "NoExecute")
            for t in tolerations
        ):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds})


def check_preconditions(kind: Kind, current: Object, preconditions: Object) -> None:
    meta = current["metadata"]
    if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
        raise failures.conflict(
            kind,
            meta["name"],
            f"Precondition failed: UID in precondition: {preconditions['uid']}, UID in object meta: {meta['uid']}",
        )
    if preconditions.get("resourceVersion") and preconditions["resourceVersion"] != meta["resourceVersion"]:
        raise failures.conflict(kind, meta["name"])


def pod_deletion(pod: Object, grace_seconds: int | None, now: float) -> Object | None:
    """What a delete of `pod` stores: None when it goes at once (not bound to a node, finished, or a grace period of
    0), `pod` itself when an earlier deadline stands, else the pod with its deletionTimestamp (now + grace)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    grace = spec.get("terminationGracePeriodSeconds", 30) if grace_seconds is None else max(0, grace_seconds)
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed") or grace == 0:
        return None
    meta = pod["metadata"]
    if "deletionTimestamp" in meta and now + grace >= parse_timestamp(meta["deletionTimestamp"]):
        return pod  # a later deadline never replaces an earlier one
    edited = copy.deepcopy(pod)
    edited["metadata"]["deletionTimestamp"] = timestamp(now + grace)
    edited["metadata"]["deletionGracePeriodSeconds"] = grace
    return edited


def namespace_deletion(namespace: Object, now: float) -> Object:
    """A namespace being deleted turns Terminating (its controller empties it, then removes it)."""
    if namespace.get("status", {}).get("phase") == "Terminating":
        return namespace
    edited = copy.deepcopy(namespace)
    edited["metadata"]["deletionTimestamp"] = timestamp(now)
    edited["metadata"]["deletionGracePeriodSeconds"] = 0
    edited["status"] = {"phase": "Terminating"}
    return edited
