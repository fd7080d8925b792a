"""The API server's REST surface, without HTTP: a request (method, path, query, body, who asks) in, an answer out (a
JSON object with its code, a watch or a log to stream). Paths are the real server's: discovery (`/api`, `/apis`,
`/api/v1`, `/apis/GROUP/VERSION`, `/version`), collections and objects (`/api/v1/namespaces/NS/pods/NAME`), their
subresources (`status`, `binding`, `log`, `eviction`, a service account's `token`). `server.py` carries it over HTTPS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scaler_rehearsal.fake_kubernetes import failures
from scaler_rehearsal.fake_kubernetes.access import Authorizer, Request, Tokens, User
from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.kinds import GROUP_VERSIONS, KINDS, Kind, kind_of
from scaler_rehearsal.fake_kubernetes.object_rules import timestamp
from scaler_rehearsal.fake_kubernetes.store import Store
from scaler_rehearsal.fake_kubernetes.tables import as_table
from scaler_rehearsal.fake_kubernetes.watches import Watch

Object = dict[str, Any]
SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-scaler-rehearsal",
    "gitCommit": "",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass(frozen=True, slots=True)
class Answer:
    code: int
    body: Object


@dataclass(frozen=True, slots=True)
class WatchAnswer:
    watch: Watch
    timeout_seconds: float
    bookmarks: bool
    table: bool


@dataclass(frozen=True, slots=True)
class LogAnswer:
    namespace: str
    name: str
    uid: str
    follow: bool
    previous: bool
    tail_lines: int | None


Outcome = Answer | WatchAnswer | LogAnswer


@dataclass(frozen=True, slots=True)
class Target:
    kind: Kind
    namespace: str  #: "" for cluster kinds, and for a namespaced kind listed across namespaces
    name: str  #: "" for a collection
    subresource: str


class Api:
    def __init__(self, store: Store, tokens: Tokens, address: str, watch_timeout_seconds: float = 1800.0) -> None:
        self._store = store
        self._tokens = tokens
        self._authorizer = Authorizer(store)
        self._address = address  #: host:port, for APIVersions
        self._watch_timeout = watch_timeout_seconds

    def handle(
        self, user: User, method: str, path: str, query: Mapping[str, str], body: bytes, content_type: str, accept: str
    ) -> Outcome:
        parts = [part for part in path.split("/") if part]
        if method == "GET" and (discovered := self._discovery(parts)) is not None:
            return Answer(200, discovered)
        target = self._target(parts)
        verb = self._verb(method, target, query)
        self._authorizer.check(
            user,
            Request(verb, target.kind.group, target.kind.plural, target.subresource, target.namespace, target.name),
        )
        if body and "protobuf" in content_type:
            raise ApiFailure(415, "UnsupportedMediaType", "the rehearsal takes JSON, not protobuf: `kubectl create "
                             "namespace|secret|configmap` send protobuf; write the object with `kubectl create ... "
                             "--dry-run=client -o yaml | kubectl apply -f -` (apply sends JSON)")  # fmt: skip
        table = "as=Table" in accept
        if verb == "watch":
            timeout = float(query.get("timeoutSeconds") or self._watch_timeout)
            watch = self._store.watch(
                target.kind.plural,
                target.namespace or None,
                query.get("labelSelector"),
                query.get("fieldSelector") or _name_field(target),
                query.get("resourceVersion"),
            )
            return WatchAnswer(watch, timeout, query.get("allowWatchBookmarks") == "true", table)
        if target.subresource in ("log", "binding", "eviction", "token"):
            return self._subresource(verb, target, query, _json(body))
        answer = self._crud(verb, target, query, body, content_type)
        if table and verb in ("get", "list") and answer.code == 200:
            return Answer(200, as_table(target.kind, answer.body, self._store.now()))
        return answer

    # ------------------------------------------------------------ routing

    def _discovery(self, parts: list[str]) -> Object | None:
        if parts == ["version"]:
            return dict(SERVER_VERSION)
        if parts == ["api"]:
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self._address}],
            }
        if parts[:2] == ["openapi", "v3"]:
            return openapi_v3(parts[2:])
        if parts == ["apis"]:
            groups = sorted({group for group, _ in GROUP_VERSIONS if group})
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": group,
                        "versions": [{"groupVersion": f"{group}/v1", "version": "v1"}],
                        "preferredVersion": {"groupVersion": f"{group}/v1", "version": "v1"},
                    }
                    for group in groups
                ],
            }
        if (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis"):
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            kinds = GROUP_VERSIONS.get((group, version))
            if kinds is None:
                raise failures.not_found_path()
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{group}/{version}".lstrip("/"),
                "resources": [entry for kind in kinds for entry in kind.discovery()],
            }
        if len(parts) == 2 and parts[0] == "apis":
            group = parts[1]
            if (group, "v1") not in GROUP_VERSIONS:
                raise failures.not_found_path()
            preferred = {"groupVersion": f"{group}/v1", "version": "v1"}
            return {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": group,
                "versions": [preferred],
                "preferredVersion": preferred,
            }
        return None

    def _target(self, parts: list[str]) -> Target:
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise failures.not_found_path()
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        kind = kind_of(group, version, rest[0])
        if kind is None or len(rest) > 3:
            raise failures.not_found_path()
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        if subresource and subresource not in kind.subresources:
            raise failures.not_found_path()
        if not kind.namespaced and namespace:
            raise failures.not_found_path()
        if kind.namespaced and name and not namespace:
            raise failures.not_found_path()
        return Target(kind, namespace, name, subresource)

    @staticmethod
    def _verb(method: str, target: Target, query: Mapping[str, str]) -> str:
        if method == "GET":
            if query.get("watch") in ("true", "1"):
                return "watch"
            return "get" if target.name else "list"
        verbs = {
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if target.name else "deletecollection",
        }
        if method not in verbs or (method != "POST" and method != "DELETE" and not target.name):
            raise failures.method_not_allowed()
        if method == "POST" and target.name and not target.subresource:
            raise failures.method_not_allowed()
        return verbs[method]

    # ------------------------------------------------------------ reads and writes

    def _crud(self, verb: str, target: Target, query: Mapping[str, str], body: bytes, content_type: str) -> Answer:
        kind, namespace, name = target.kind, target.namespace, target.name
        store = self._store
        if verb == "get":
            return Answer(200, store.get(kind.plural, namespace, name))
        if verb == "list":
            items, revision, token = store.list(
                kind.plural,
                namespace or None,
                query.get("labelSelector"),
                query.get("fieldSelector"),
                int(query.get("limit") or 0),
                query.get("continue"),
            )
            metadata: Object = {"resourceVersion": revision}
            if token:
                metadata["continue"] = token
            return Answer(
                200, {"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": metadata, "items": items}
            )
        if verb == "create":
            if kind.namespaced and not namespace:
                raise failures.method_not_allowed()
            return Answer(201, store.create(kind.plural, namespace, _json(body), query.get("dryRun") == "All"))
        if verb == "update":
            return Answer(200, store.replace(kind.plural, namespace, name, _json(body), target.subresource))
        if verb == "patch":
            return Answer(200, store.patch(kind.plural, namespace, name, content_type, _json(body), target.subresource))
        options = _json(body) if body.strip() else {}
        grace = query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
        if verb == "deletecollection":
            items = store.delete_collection(
                kind.plural, namespace or None, query.get("labelSelector"), query.get("fieldSelector")
            )
            return Answer(
                200,
                {
                    "kind": f"{kind.kind}List",
                    "apiVersion": kind.api_version,
                    "metadata": {"resourceVersion": str(store.revision)},
                    "items": items,
                },
            )
        left = store.delete(
            kind.plural, namespace, name, None if grace is None else int(grace), options.get("preconditions")
        )
        if left is not None:
            return Answer(200, left)
        return Answer(
            200,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": name, "kind": kind.plural, **({"group": kind.group} if kind.group else {})},
            },
        )

    def _subresource(self, verb: str, target: Target, query: Mapping[str, str], body: Object) -> Outcome:
        namespace, name = target.namespace, target.name
        if target.subresource == "log":
            pod = self._store.get("pods", namespace, name)
            tail = query.get("tailLines")
            return LogAnswer(
                namespace,
                name,
                pod["metadata"]["uid"],
                query.get("follow") == "true",
                query.get("previous") == "true",
                int(tail) if tail else None,
            )
        if target.subresource == "binding":
            return Answer(201, self._bind(namespace, name, body))
        if target.subresource == "eviction":
            self._store.delete("pods", namespace, name, (body.get("deleteOptions") or {}).get("gracePeriodSeconds"))
            return Answer(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        self._store.get("serviceaccounts", namespace, name)
        seconds = int((body.get("spec") or {}).get("expirationSeconds") or 3600)
        return Answer(
            201,
            {
                "kind": "TokenRequest",
                "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": namespace},
                "spec": body.get("spec") or {},
                "status": {
                    "token": self._tokens.for_account(namespace, name),
                    "expirationTimestamp": timestamp(self._store.now() + seconds),
                },
            },
        )

    def _bind(self, namespace: str, name: str, binding: Object) -> Object:
        node = (binding.get("target") or {}).get("name", "")
        pods = KINDS["pods"]

        def bind(pod: Object) -> bool:
            if pod["spec"].get("nodeName"):
                raise failures.conflict(
                    pods, name, f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
                )
            pod["spec"]["nodeName"] = node
            return True

        self._store.get("pods", namespace, name)
        self._store.mutate("pods", namespace, name, bind)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def openapi_v3(parts: list[str]) -> Object:
    """The OpenAPI v3 documents kubectl reads to learn that the server validates fields itself (`fieldValidation`
    on each kind's PATCH): the index, then one document per group version with just that."""
    if not parts:
        index: Object = {}
        for group, version in GROUP_VERSIONS:
            key = f"apis/{group}/{version}" if group else f"api/{version}"
            index[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash=rehearsal"}
        return {"paths": index}
    group, version = (
        ("", parts[1])
        if parts[0] == "api" and len(parts) == 2
        else ((parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else ("?", "?"))
    )
    kinds = GROUP_VERSIONS.get((group, version))
    if kinds is None:
        raise failures.not_found_path()
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    parameter = {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}
    paths: Object = {}
    for kind in kinds:
        path = (
            f"{prefix}/namespaces/{{namespace}}/{kind.plural}/{{name}}"
            if kind.namespaced
            else f"{prefix}/{kind.plural}/{{name}}"
        )
        extension = {"group": group, "version": version, "kind": kind.kind}
        paths[path] = {
            "patch": {"parameters": [parameter], "x-kubernetes-group-version-kind": extension},
            "put": {"parameters": [parameter], "x-kubernetes-group-version-kind": extension},
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
        "paths": paths,
    }


def _name_field(target: Target) -> str | None:
    """A watch of one object (`.../pods/NAME?watch=true`, the old form) is a watch with a name field selector."""
    return f"metadata.name={target.name}" if target.name else None


def _json(body: bytes) -> Any:
    if not body:
        return {}
    try:
        return json.loads(body)
    except ValueError as error:
        raise ApiFailure(400, "BadRequest", f"the body of the request could not be decoded: {error}") from None
