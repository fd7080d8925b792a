"""The controllers of the rehearsal's control plane, as far as the guide's manifests need them: a namespace gets its
`default` service account and `kube-root-ca.crt` ConfigMap, and a deleted one empties (its pods deleted gracefully)
before it goes; objects whose owner is gone are deleted (the garbage collector); a Deployment keeps `replicas`
pods of its template running (pods labelled with its template's hash and owned by it: the rehearsal has no
ReplicaSets in between), replacing pods that ended or were evicted, and reports its status."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.kinds import KINDS
from scaler_rehearsal.fake_kubernetes.store import Store

Object = dict[str, Any]
TEMPLATE_HASH_LABEL = "pod-template-hash"


class Controllers:
    def __init__(self, store: Store, ca_pem: str) -> None:
        self._store = store
        self._ca_pem = ca_pem

    def step(self) -> None:
        self._namespaces()
        self._collect_garbage()
        for deployment in self._store.items("deployments"):
            try:
                self._deployment(deployment)
            except ApiFailure:
                continue  # its namespace is going away, or it changed meanwhile: the next step sees it again

    # ------------------------------------------------------------ namespaces

    def _namespaces(self) -> None:
        for namespace in self._store.items("namespaces"):
            name = namespace["metadata"]["name"]
            if namespace.get("status", {}).get("phase") == "Terminating":
                self._empty(name)
                continue
            if self._store.find("serviceaccounts", name, "default") is None:
                self._create("serviceaccounts", name, {"metadata": {"name": "default"}})
            if self._store.find("configmaps", name, "kube-root-ca.crt") is None:
                self._create(
                    "configmaps", name, {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": self._ca_pem}}
                )

    def _empty(self, namespace: str) -> None:
        left = 0
        for plural, kind in KINDS.items():
            if not kind.namespaced:
                continue
            for obj in self._store.items(plural, namespace):
                left += 1
                if "deletionTimestamp" not in obj["metadata"]:
                    try:
                        self._store.delete(plural, namespace, obj["metadata"]["name"])
                    except ApiFailure:
                        continue
        if not left:
            self._store.remove("namespaces", "", namespace)

    def _create(self, plural: str, namespace: str, body: Object) -> None:
        try:
            self._store.create(plural, namespace, body)
        except ApiFailure:
            pass

    # ------------------------------------------------------------ garbage collection

    def _collect_garbage(self) -> None:
        uids = {obj["metadata"].get("uid") for plural in KINDS for obj in self._store.items(plural)}
        for plural, kind in KINDS.items():
            for obj in self._store.items(plural):
                owners = obj["metadata"].get("ownerReferences") or []
                if owners and not any(owner.get("uid") in uids for owner in owners):
                    if "deletionTimestamp" in obj["metadata"]:
                        continue
                    meta = obj["metadata"]
                    try:
                        self._store.delete(plural, meta.get("namespace", "") if kind.namespaced else "", meta["name"])
                    except ApiFailure:
                        continue

    # ------------------------------------------------------------ deployments

    def _deployment(self, deployment: Object) -> None:
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        if "deletionTimestamp" in meta:
            return
        namespace = meta["namespace"]
        template = spec.get("template") or {}
        template_hash = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
        owned = [
            pod
            for pod in self._store.items("pods", namespace)
            if any(owner.get("uid") == meta["uid"] for owner in pod["metadata"].get("ownerReferences") or [])
        ]
        live = [
            pod
            for pod in owned
            if "deletionTimestamp" not in pod["metadata"]
            and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")
        ]
        for pod in owned:
            outdated = pod["metadata"].get("labels", {}).get(TEMPLATE_HASH_LABEL) != template_hash
            finished = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
            if (outdated or finished) and "deletionTimestamp" not in pod["metadata"]:
                self._store.delete("pods", namespace, pod["metadata"]["name"])
                if pod in live:
                    live.remove(pod)
        wanted = int(spec.get("replicas", 1))
        for _ in range(wanted - len(live)):
            self._store.create("pods", namespace, self._pod(deployment, template, template_hash))
        for pod in sorted(live, key=lambda pod: pod["metadata"]["creationTimestamp"], reverse=True)[
            : max(0, len(live) - wanted)
        ]:
            self._store.delete("pods", namespace, pod["metadata"]["name"])
        ready = sum(1 for pod in live if _is_ready(pod))
        status = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": min(len(live), wanted),
            "updatedReplicas": min(len(live), wanted),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if ready >= wanted else "False",
                    "reason": "MinimumReplicasAvailable" if ready >= wanted else "MinimumReplicasUnavailable",
                    "message": "Deployment has minimum availability."
                    if ready >= wanted
                    else "Deployment does not have minimum availability.",
                }
            ],
        }
        if ready == 0:
            status.pop("readyReplicas")
            status.pop("availableReplicas")
            status["unavailableReplicas"] = wanted

        def report(edited: Object) -> bool:
            if edited.get("status") == status:
                return False
            edited["status"] = status
            return True

        self._store.mutate("deployments", namespace, meta["name"], report)

    def _pod(self, deployment: Object, template: Object, template_hash: str) -> Object:
        meta = deployment["metadata"]
        pod_meta = copy.deepcopy(template.get("metadata") or {})
        pod_meta.setdefault("labels", {})[TEMPLATE_HASH_LABEL] = template_hash
        pod_meta["generateName"] = f"{meta['name']}-{template_hash}-"
        pod_meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        pod_meta.pop("name", None)
        return {"metadata": pod_meta, "spec": copy.deepcopy(template.get("spec") or {})}


def _is_ready(pod: Object) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
