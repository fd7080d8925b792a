"""The API server's objects, as etcd and the API server keep them: one resourceVersion counter across the store
(every write takes the next), a history of changes that watches replay from a resourceVersion (`history.py`: 410
Gone once it is compacted), uids, creation timestamps, `generateName`, optimistic concurrency (a write naming an
older resourceVersion is a 409 Conflict), and graceful deletion of pods (a bound pod stays, with its
deletionTimestamp, until its kubelet has seen its processes end). What a write does to an object is in
`object_rules.py`.

Rules: a stored object is never changed in place (each write stores a new dict), so that what a watch or a list
handed out stays as it was; every write goes through `_write` or `_remove`, under the one lock.
"""

from __future__ import annotations

import builtins
import copy
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from scaler_rehearsal.fake_kubernetes import failures, object_rules
from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.history import HISTORY_LIMIT, History
from scaler_rehearsal.fake_kubernetes.kinds import KINDS, Kind
from scaler_rehearsal.fake_kubernetes.object_rules import timestamp
from scaler_rehearsal.fake_kubernetes.selectors import SelectorError, parse_field_selector, parse_label_selector
from scaler_rehearsal.fake_kubernetes.watches import Change, Watch

Object = dict[str, Any]
#: The characters of a generated name's suffix (the API server's: no vowels, no look-alikes).
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: How long a new pod tolerates its node being not ready or unreachable (the API server's
#: --default-not-ready-toleration-seconds and --default-unreachable-toleration-seconds).
DEFAULT_TOLERATION_SECONDS = 300


class Store:
    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        history_limit: int = HISTORY_LIMIT,
        default_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS,
    ) -> None:
        self._clock = clock
        self._toleration_seconds = default_toleration_seconds
        self._lock = threading.RLock()
        self.revision = 0
        self._objects: dict[str, dict[tuple[str, str], Object]] = {plural: {} for plural in KINDS}
        self._history = History(history_limit)
        self._wakers: list[threading.Event] = []
        self._random = random.Random()

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    def now(self) -> float:
        return self._clock()

    def waker(self) -> threading.Event:
        """An event set at every write (the kubelet and the controllers wait on theirs)."""
        event = threading.Event()
        self._wakers.append(event)
        return event

    # ------------------------------------------------------------ reads

    def get(self, plural: str, namespace: str, name: str) -> Object:
        kind = KINDS[plural]
        with self._lock:
            found = self._objects[plural].get(self._key(kind, namespace, name))
        if found is None:
            raise failures.not_found(kind, name)
        return found

    def find(self, plural: str, namespace: str, name: str) -> Object | None:
        with self._lock:
            return self._objects[plural].get(self._key(KINDS[plural], namespace, name))

    def items(self, plural: str, namespace: str | None = None) -> list[Object]:
        """Every object of a kind (in a namespace), sorted as a list is."""
        with self._lock:
            found = self._objects[plural]
            keys = sorted(key for key in found if namespace is None or key[0] == namespace)
            return [found[key] for key in keys]

    def list(
        self,
        plural: str,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> tuple[list[Object], str, str | None]:
        """(items, the list's resourceVersion, a continue token when `limit` cut it short)."""
        labels, fields = self._selectors(plural, label_selector, field_selector)
        watch = Watch(plural, namespace, labels, fields)
        start: tuple[str, str] | None = None
        with self._lock:
            revision = self.revision
            if continue_token:
                start, revision = self._continue_from(continue_token)
            selected = [
                obj
                for obj in self.items(plural, namespace)
                if watch.selects(obj) and (start is None or _sort_key(obj) > start)
            ]
        if limit and len(selected) > limit:
            last = _sort_key(selected[limit - 1])
            token = json.dumps({"rv": revision, "start": list(last)}).encode().hex()
            return selected[:limit], str(revision), token
        return selected, str(revision), None

    def _continue_from(self, token: str) -> tuple[tuple[str, str], int]:
        try:
            decoded = json.loads(bytes.fromhex(token))
            start, revision = (str(decoded["start"][0]), str(decoded["start"][1])), int(decoded["rv"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise failures.bad_request("continue key is not valid: incorrect encoded start resourceVersion") from None
        if revision < self._history.compacted:
            raise failures.expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new "
                "list without the continue parameter."
            )
        return start, revision

    def _selectors(self, plural: str, label_selector: str | None, field_selector: str | None) -> Any:
        try:
            return parse_label_selector(label_selector), parse_field_selector(field_selector, plural)
        except SelectorError as error:
            raise failures.bad_request(str(error)) from None

    # ------------------------------------------------------------ watches

    def watch(
        self,
        plural: str,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
    ) -> Watch:
        """From now (every current object ADDED first) without a resourceVersion or with "0"; else every change after
        it, or an ERROR 410 when the history no longer goes back that far."""
        labels, fields = self._selectors(plural, label_selector, field_selector)
        watch = Watch(plural, namespace, labels, fields)
        with self._lock:
            since: int | None = None
            if resource_version in (None, "", "0"):
                for obj in self.items(plural, namespace):
                    if watch.selects(obj):
                        watch.put("ADDED", obj)
            else:
                try:
                    since = int(str(resource_version))
                except ValueError:
                    raise failures.bad_request(f"invalid resource version: {resource_version!r}") from None
            self._history.follow(watch, since)
        return watch

    def stop_watch(self, watch: Watch) -> None:
        with self._lock:
            self._history.stop(watch)
        watch.close()

    def close_watches(self) -> int:
        """End every open watch (what a restarting API server does); how many there were."""
        with self._lock:
            return self._history.close_watches()

    def compact(self) -> int:
        """Drop the whole history (etcd's compaction): watches and continued lists from an older resourceVersion
        get 410 Gone. The revision compacted to."""
        with self._lock:
            self._history.compact(self.revision)
            return self.revision

    # ------------------------------------------------------------ writes

    def create(self, plural: str, namespace: str, body: Object, dry_run: bool = False) -> Object:
        """`dry_run`: every check, nothing written (`?dryRun=All`)."""
        kind = KINDS[plural]
        obj = object_rules.decoded(kind, body)
        metadata = obj.setdefault("metadata", {})
        object_rules.place(kind, metadata, namespace)
        with self._lock:
            if kind.namespaced:
                self._require_namespace(kind, namespace, metadata.get("name") or metadata.get("generateName", ""))
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = self._generated_name(kind, namespace, str(metadata["generateName"]))
            kind.defaults(obj)
            object_rules.check(kind, obj)
            name = metadata["name"]
            if self._key(kind, namespace, name) in self._objects[plural]:
                raise failures.already_exists(kind, name)
            if plural == "pods":
                self._admit_pod(kind, obj)
            for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
                metadata.pop(field, None)
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = timestamp(self._clock())
            if plural in ("deployments",):
                metadata["generation"] = 1
            if dry_run:
                return obj
            return self._write(kind, obj, None)

    def replace(self, plural: str, namespace: str, name: str, body: Object, subresource: str = "") -> Object:
        kind = KINDS[plural]
        obj = object_rules.decoded(kind, body)
        metadata = obj.setdefault("metadata", {})
        if metadata.get("name") not in (None, name):
            raise failures.bad_request(
                f"the name of the object ({metadata.get('name')}) does not match the name on the URL ({name})"
            )
        metadata["name"] = name
        object_rules.place(kind, metadata, namespace)
        with self._lock:
            current = self.get(plural, namespace, name)
            wanted = metadata.get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise failures.conflict(kind, name)
            return self._update(kind, current, obj, subresource)

    def patch(
        self, plural: str, namespace: str, name: str, patch_type: str, patch: Any, subresource: str = ""
    ) -> Object:
        kind = KINDS[plural]
        apply = object_rules.patch_applier(patch_type)
        with self._lock:
            current = self.get(plural, namespace, name)
            return self._update(kind, current, object_rules.patched(kind, current, apply, patch), subresource)

    def delete(
        self,
        plural: str,
        namespace: str,
        name: str,
        grace_seconds: int | None = None,
        preconditions: Object | None = None,
    ) -> Object | None:
        """The object as it stays (a pod or namespace on its way out), or None when it went at once."""
        kind = KINDS[plural]
        with self._lock:
            current = self.get(plural, namespace, name)
            object_rules.check_preconditions(kind, current, preconditions or {})
            if plural == "pods":
                staying = object_rules.pod_deletion(current, grace_seconds, self._clock())
                if staying is None:
                    self._remove(kind, current)
                    return current
                return current if staying is current else self._write(kind, staying, current)
            if plural == "namespaces":
                terminating = object_rules.namespace_deletion(current, self._clock())
                return current if terminating is current else self._write(kind, terminating, current)
            self._remove(kind, current)
            return None

    def delete_collection(
        self, plural: str, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> builtins.list[Object]:
        items, _revision, _token = self.list(plural, namespace, label_selector, field_selector)
        for obj in items:
            meta = obj["metadata"]
            try:
                self.delete(plural, meta.get("namespace", ""), meta["name"])
            except ApiFailure:
                continue
        return items

    def mutate(self, plural: str, namespace: str, name: str, change: Callable[[Object], bool]) -> Object | None:
        """For the server's own components (kubelet, scheduler, controllers): `change` edits a copy of the object
        and says whether it changed anything; the new object, None when it is gone or nothing changed."""
        kind = KINDS[plural]
        with self._lock:
            current = self.find(plural, namespace, name)
            if current is None:
                return None
            edited = copy.deepcopy(current)
            if not change(edited):
                return None
            return self._write(kind, edited, current)

    def remove(self, plural: str, namespace: str, name: str) -> None:
        """The end of a graceful deletion (what the kubelet's final delete does)."""
        kind = KINDS[plural]
        with self._lock:
            current = self.find(plural, namespace, name)
            if current is not None:
                self._remove(kind, current)

    # ------------------------------------------------------------ helpers

    def _key(self, kind: Kind, namespace: str, name: str) -> tuple[str, str]:
        return (namespace if kind.namespaced else "", name)

    def _require_namespace(self, kind: Kind, namespace: str, name: str) -> None:
        found = self._objects["namespaces"].get(("", namespace))
        if found is None:
            raise failures.not_found(KINDS["namespaces"], namespace)
        if found.get("status", {}).get("phase") == "Terminating":
            raise failures.forbidden(
                f'{kind.qualified} "{name}" is forbidden: unable to create new content in namespace {namespace} '
                "because it is being terminated",
                kind,
                name,
            )

    def _generated_name(self, kind: Kind, namespace: str, prefix: str) -> str:
        prefix = prefix[: 63 - 5] if len(prefix) > 58 else prefix
        for _ in range(100):
            name = prefix + "".join(self._random.choice(SUFFIX_ALPHABET) for _ in range(5))
            if self._key(kind, namespace, name) not in self._objects[kind.plural]:
                return name
        raise failures.already_exists(kind, prefix)

    def _admit_pod(self, kind: Kind, pod: Object) -> None:
        object_rules.default_tolerations(pod, self._toleration_seconds)
        namespace, account = pod["metadata"]["namespace"], pod["spec"].get("serviceAccountName", "default")
        if (namespace, account) not in self._objects["serviceaccounts"]:
            name = pod["metadata"]["name"]
            raise failures.forbidden(
                f'pods "{name}" is forbidden: error looking up service account {namespace}/{account}: '
                f'serviceaccount "{account}" not found',
                kind,
                name,
            )

    def _update(self, kind: Kind, current: Object, obj: Object, subresource: str) -> Object:
        new = object_rules.updated(kind, current, obj, subresource)
        if new == current:
            return current  # a no-op update takes no resourceVersion
        return self._write(kind, new, current)

    def _write(self, kind: Kind, obj: Object, before: Object | None) -> Object:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        meta = obj["metadata"]
        self._objects[kind.plural][self._key(kind, meta.get("namespace", ""), meta["name"])] = obj
        self._record(Change(self.revision, kind.plural, before, obj))
        return obj

    def _remove(self, kind: Kind, obj: Object) -> None:
        self.revision += 1
        meta = obj["metadata"]
        del self._objects[kind.plural][self._key(kind, meta.get("namespace", ""), meta["name"])]
        final = copy.deepcopy(obj)
        final["metadata"]["resourceVersion"] = str(self.revision)
        self._record(Change(self.revision, kind.plural, obj, final, deleted=True))

    def _record(self, change: Change) -> None:
        self._history.record(change)
        for waker in self._wakers:
            waker.set()


def _sort_key(obj: Object) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])
