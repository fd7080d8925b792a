"""The kubernetes backend: one unit = one worker pod (`pods.py`), followed by list-then-watch.

- The manager's pods are listed once by their label, then watched from the list's resourceVersion; the watch keeps a
  cache that `list_units` reads (no polling). A watch the server ends is resumed from the last resourceVersion
  seen (lightkube does it); one answered 410 Gone (its history compacted), or that failed otherwise, is re-listed.
- launch: the keys' Secret (once), then one pod per unit; 409/429/5xx and lost connections are retried with back-off
  (`client.retried`); a refusal (403 RBAC or quota, 422) is raised with the API's words, and the runner says it once
  and backs off.
- list_units: the cache, as UnitInfo (`pods.unit_of`): Pending pods PENDING (with why they wait: unschedulable, an
  image that cannot be pulled), Running ones RUNNING, those being deleted STOPPING, finished ones GONE with how they
  ended (OOMKilled, Evicted, an exit code); a finished pod is deleted once listed GONE, and a pod deleted by someone
  else stays listed GONE for a while, saying so.
- a pod whose node stopped answering (`pods.node_lost`: NodeLost) is listed STOPPING, so that it is replaced, and
  deleted; a pod still Terminating STUCK_SECONDS after its deletion deadline (no kubelet confirms: its node is lost)
  is force-deleted, as is, when the manager stops, one whose node is lost: none is left Terminating for ever.
- terminate: a delete with the grace period (the worker gets SIGTERM and leaves the scheduler); an unknown or
  gone pod is a no-op.
- close: the watch and the client; the pods stay for the next manager with the same id (and the Secret, while
  one of them may still start a worker: a pod that finished or is being deleted does not keep it).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from lightkube import AsyncClient, codecs
from lightkube.resources.core_v1 import Pod, Secret

from scaler.config.sections import KubernetesWorkerManagerConfig
from scaler.security.curve import key_texts, security_of
from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState
from scaler.worker_manager.kubernetes import pods as pod_specs
from scaler.worker_manager.kubernetes.client import (
    Connection,
    KubeError,
    as_dict,
    connection_of,
    describe,
    new_client,
    retried,
)

logger = logging.getLogger(__name__)
Object = dict[str, Any]
#: How long a pod deleted by someone else stays listed GONE (with who deleted it), so the manager names it.
DELETED_SHOWN_SECONDS = 60.0
#: The first pause before a failed watch is listed again (doubling, at most MAX).
RELIST_PAUSE_SECONDS = 0.5
MAX_RELIST_PAUSE_SECONDS = 30.0
#: How long `list_units` waits for the first listing before it says it could not list.
FIRST_LIST_SECONDS = 30.0
#: How long after its deletion deadline a pod still Terminating is force-deleted: a kubelet that runs SIGKILLs the
#: pod's processes at the deadline and confirms within seconds; one that does not is on a node that is lost.
STUCK_SECONDS = 10.0


class KubernetesBackend:
    def __init__(
        self, config: KubernetesWorkerManagerConfig, manager_id: str, connection: Connection | None = None,
        template: Object | None = None,
    ) -> None:  # fmt: skip
        self._config = config
        self._manager_id = manager_id
        self._connection = connection or connection_of(config)
        self._template = template or {}
        self._client_now: AsyncClient | None = None  #: made when first needed, again after a close
        self._selector: dict[str, Any] = {pod_specs.MANAGER_LABEL: pod_specs.label_value(manager_id)}
        self._pods: dict[str, Object] = {}  #: pod name -> the pod as last seen (the watch's cache)
        self._synced = asyncio.Event()  #: the cache holds a whole listing (set again after each re-list)
        self._list_error: KubeError | None = None  #: why the latest listing failed, while it does
        self._watch: asyncio.Task[None] | None = None
        self._deleted: dict[str, tuple[UnitInfo, float]] = {}  #: pods deleted by someone else: (unit, when seen)
        self._deleting: set[str] = set()  #: pods this manager deletes (their DELETED event is no surprise)
        self._reported_gone: set[str] = set()  #: finished pods listed GONE once: deleted at the next listing
        self._forced: set[str] = set()  #: pods force-deleted (their kubelet could not confirm)
        self._keys_ready = False
        self.relists = 0  #: how often the pods were listed (tests: a 410 is followed by a re-list)

    @property
    def _client(self) -> AsyncClient:
        if self._client_now is None:
            self._client_now = new_client(self._connection)
        return self._client_now

    @property
    def workers_per_unit(self) -> int:
        return 1

    @property
    def namespace(self) -> str:
        return self._connection.namespace

    # ------------------------------------------------------------ the contract

    async def launch(self, count: int, spec: LaunchSpec) -> list[str]:
        self._start_watch()
        has_keys = await self._ensure_keys(spec)
        launched: list[str] = []
        for _ in range(count):
            unit_id = uuid.uuid4().hex[:12]
            manifest = pod_specs.worker_pod(self._config, spec, unit_id, self._template, has_keys)
            try:
                created = await self._create_pod(manifest)
            except KubeError:
                if launched:  # a partial success: the reconciler counts the difference as a failure
                    return launched
                raise
            self._seen("ADDED", created)
            launched.append(unit_id)
        return launched

    async def list_units(self) -> list[UnitInfo]:
        self._start_watch()
        try:
            await asyncio.wait_for(self._synced.wait(), FIRST_LIST_SECONDS)
        except asyncio.TimeoutError:
            raise self._list_error or KubeError("the first listing of the pods did not come") from None
        now = time.time()
        units = [pod_specs.unit_of(pod) for pod in self._pods.values()]
        self._deleted = {name: seen for name, seen in self._deleted.items() if now - seen[1] < DELETED_SHOWN_SECONDS}
        units += [unit for unit, _when in self._deleted.values()]
        await self._collect_finished()
        await self._collect_lost(now)
        return units

    async def terminate(self, unit_ids: list[str], reason: str) -> None:
        wanted = set(unit_ids)
        for name, pod in list(self._pods.items()):
            if pod_specs.unit_id_of(pod) in wanted and not (pod.get("metadata") or {}).get("deletionTimestamp"):
                await self._delete(name, self._config.k8s_grace_seconds)

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        now = time.time()
        for name, pod in list(self._pods.items()):  # finished pods are not left behind, nor those of a lost node
            if name in self._forced:
                self._pods.pop(name, None)  # force-deleted already: gone
                continue
            finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") and name not in self._deleting
            if finished or _abandoned(pod, now):
                try:
                    await self._delete(name, 0)
                except KubeError as error:
                    logger.warning("could not delete the pod %s: %s", name, error)
                self._pods.pop(name, None)
        if self._keys_ready and not any(
            pod_specs.needs_keys(pod) and name not in self._deleting for name, pod in self._pods.items()
        ):
            try:  # no pod of this manager is left to need the keys (those the API still holds are going)
                await self._client.delete(Secret, pod_specs.keys_secret_name(self._manager_id))
            except Exception as error:
                logger.debug("the keys' Secret was not deleted: %s", error)
        if self._client_now is not None:
            await self._client_now.close()
            self._client_now = None
        self._synced = asyncio.Event()  # a use after the close lists the pods again

    # ------------------------------------------------------------ pods

    async def _create_pod(self, manifest: Object) -> Object:
        pod = codecs.from_dict(manifest)
        created = await retried(lambda: self._client.create(pod), f"create pod {manifest['metadata']['name']}",
                                self._connection)  # fmt: skip
        return as_dict(created)

    async def _delete(self, name: str, grace_seconds: int) -> None:
        self._deleting.add(name)
        try:
            await retried(lambda: self._client.delete(Pod, name, grace_period=grace_seconds), f"delete pod {name}",
                          self._connection)  # fmt: skip
        except KubeError as error:
            if error.code != 404:  # already gone: the contract's no-op
                self._deleting.discard(name)
                raise
            return
        cached = self._pods.get(name)
        if cached is not None and not cached["metadata"].get("deletionTimestamp"):
            # STOPPING from now on, not only once the watch brings the pod's deletionTimestamp (the contract)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + grace_seconds))
            self._pods[name] = {**cached, "metadata": {**cached["metadata"], "deletionTimestamp": stamp}}

    async def _collect_finished(self) -> None:
        """Delete the finished pods listed GONE once already (their ending said): no finished pod is left."""
        for name, pod in list(self._pods.items()):
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                continue
            if name not in self._reported_gone:
                self._reported_gone.add(name)
            elif name not in self._deleting:
                try:
                    await self._delete(name, 0)
                except KubeError as error:
                    logger.warning("could not delete the finished pod %s: %s", name, error)

    async def _collect_lost(self, now: float) -> None:
        """Delete the pods whose node stopped answering (they are replaced); force-delete those still Terminating
        STUCK_SECONDS after their deadline: the kubelet that would confirm is gone with its node (the pod garbage
        collector would only take them once their Node is deleted, which nobody may do)."""
        for name, pod in list(self._pods.items()):
            deadline = pod_specs.deletion_deadline(pod)
            try:
                if deadline is None and name not in self._deleting and pod_specs.node_lost(pod):
                    logger.warning(
                        "worker pod %s: %s; its tasks run again elsewhere and it is replaced: deleting it",
                        name,
                        pod_specs.node_lost(pod),
                    )
                    await self._delete(name, self._config.k8s_grace_seconds)
                elif deadline is not None and now > deadline + STUCK_SECONDS and name not in self._forced:
                    self._forced.add(name)
                    logger.warning(
                        "worker pod %s: still Terminating %.0f s after its deletion deadline, no kubelet confirms "
                        "(%s): force-deleting it",
                        name,
                        now - deadline,
                        pod_specs.disruption(pod) or pod_specs.node_lost(pod) or "its node does not answer",
                    )
                    await self._delete(name, 0)
            except KubeError as error:
                logger.warning("could not delete the pod %s: %s", name, error)

    async def _ensure_keys(self, spec: LaunchSpec) -> bool:
        """The Secret holding the workers' CURVE keys (made or brought up to date once); whether there are keys."""
        security = security_of(spec.worker)
        if security is None:
            return False
        if self._keys_ready:
            return True
        secret = codecs.from_dict(pod_specs.keys_secret(self._manager_id, key_texts(security)))
        name = pod_specs.keys_secret_name(self._manager_id)
        try:
            await retried(lambda: self._client.create(secret), f"create secret {name}", self._connection)
        except KubeError as error:
            if error.reason != "AlreadyExists":
                raise
            await retried(lambda: self._client.replace(secret), f"replace secret {name}", self._connection)
        self._keys_ready = True
        return True

    # ------------------------------------------------------------ list, then watch

    def _start_watch(self) -> None:
        if self._watch is None or self._watch.done():
            self._watch = asyncio.ensure_future(self._follow())

    async def _follow(self) -> None:
        pause = RELIST_PAUSE_SECONDS
        while True:
            try:
                version = await self._list()
                self._list_error = None
                pause = RELIST_PAUSE_SECONDS
                async for event_type, pod in self._client.watch(Pod, labels=self._selector, resource_version=version):
                    self._seen(event_type, as_dict(pod))
            except asyncio.CancelledError:
                raise
            except Exception as error:
                failure = describe(error, self._connection)
                if failure.code == 410:  # the history it resumed from is gone: a new listing is the truth
                    logger.debug("the pods' watch expired (%s): listing them again", failure)
                    continue
                if str(failure) != str(self._list_error):
                    logger.warning("following the pods failed (%s); listing them again in %g s", failure, pause)
                self._list_error = failure
                await asyncio.sleep(pause)
                pause = min(MAX_RELIST_PAUSE_SECONDS, pause * 2)

    async def _list(self) -> str:
        listing = self._client.list(Pod, labels=self._selector)
        found: dict[str, Object] = {}
        async for listed in listing:
            pod = as_dict(listed)
            if pod_specs.is_ours(pod, self._manager_id):
                found[pod["metadata"]["name"]] = pod
        version = str(listing.resourceVersion)
        now = time.time()
        for name, known in self._pods.items():
            if name in found:
                continue
            if _version(known) > _number(version):
                found[name] = known  # made after the listing's snapshot (launched meanwhile): the watch brings it
            else:
                self._gone(name, known, now)  # gone while nobody watched
        self._pods = found
        self.relists += 1
        self._synced.set()
        return version

    def _seen(self, event_type: str, pod: Object) -> None:
        name = (pod.get("metadata") or {}).get("name", "")
        if not name or not pod_specs.is_ours(pod, self._manager_id):
            return
        if event_type == "DELETED":
            known = self._pods.pop(name, None)
            if known is not None:
                self._gone(name, pod, time.time())
            return
        if event_type in ("ADDED", "MODIFIED"):
            known = self._pods.get(name)
            if known is None or _version(pod) >= _version(known):
                self._pods[name] = pod

    def _gone(self, name: str, pod: Object, now: float) -> None:
        """A pod that left the API: by this manager's hand, or someone else's (named, and kept listed a while)."""
        self._reported_gone.discard(name)
        self._forced.discard(name)
        if name in self._deleting:
            self._deleting.discard(name)
            return
        if (pod.get("metadata") or {}).get("deletionTimestamp") or (pod.get("status") or {}).get("phase") not in (
            "Succeeded", "Failed",
        ):  # fmt: skip
            how = "deleted by someone other than this manager (kubectl delete, a node drain, the namespace going)"
        else:
            how = f"{pod_specs.ending(pod)}, and deleted by someone other than this manager"
        unit = pod_specs.unit_of(pod)
        logger.warning("worker pod %s: %s; its tasks go back to the queue", name, how)
        self._deleted[name] = (
            UnitInfo(unit.unit_id, UnitState.GONE, unit.created_at, detail=f"pod {name}: {how}"),
            now,
        )


def _abandoned(pod: Object, now: float) -> bool:
    """A pod no kubelet will end: its node stopped answering, or it is past its deletion deadline."""
    deadline = pod_specs.deletion_deadline(pod)
    return pod_specs.node_lost(pod) is not None or (deadline is not None and now > deadline)


def _version(pod: Object) -> int:
    return _number((pod.get("metadata") or {}).get("resourceVersion"))


def _number(resource_version: str | None) -> int:
    try:
        return int(resource_version or 0)
    except ValueError:
        return 0
