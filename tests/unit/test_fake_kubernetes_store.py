"""The Kubernetes rehearsal's pure parts: its store (one resourceVersion counter, watches from a version, 410 after
compaction, selectors, generateName, conflicts, graceful deletion), patches, quantities and validation."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest

from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.patches import json_patch, merge_patch, strategic_merge_patch
from scaler_rehearsal.fake_kubernetes.quantity import QuantityError, parse_quantity
from scaler_rehearsal.fake_kubernetes.scheduling import Resources, unschedulable_message, unschedulable_reasons
from scaler_rehearsal.fake_kubernetes.selectors import SelectorError, labels_match, parse_label_selector
from scaler_rehearsal.fake_kubernetes.store import Store


def store() -> Store:
    made = Store(clock=lambda: 1_700_000_000.0)
    made.create("namespaces", "", {"metadata": {"name": "ns"}})
    made.create("serviceaccounts", "ns", {"metadata": {"name": "default"}})
    return made


def pod(name: str = "", **metadata: object) -> dict[str, object]:
    meta = {"name": name, **metadata} if name else dict(metadata)
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_every_write_takes_the_next_resource_version_and_a_watch_replays_from_one() -> None:
    made = store()
    first = made.create("pods", "ns", pod("a", labels={"app": "x"}))
    since = first["metadata"]["resourceVersion"]
    second = made.create("pods", "ns", pod(generateName="web-"))
    assert int(second["metadata"]["resourceVersion"]) == int(since) + 1
    assert second["metadata"]["name"].startswith("web-") and len(second["metadata"]["name"]) == 9
    made.patch("pods", "ns", "a", "application/merge-patch+json", {"metadata": {"labels": {"app": "y"}}})
    watch = made.watch("pods", "ns", "app=x", resource_version=since)
    assert watch.next(0)[0] == "DELETED"  # "a" stopped matching app=x: gone from this watch's view
    made.compact()
    expired = made.watch("pods", "ns", resource_version=since)
    event_type, status = expired.next(0) or ("", {})
    assert event_type == "ERROR" and status["code"] == 410 and status["reason"] == "Expired"


def test_a_stale_write_is_a_conflict_and_a_bound_pod_leaves_gracefully() -> None:
    made = store()
    created = made.create("pods", "ns", pod("a"))
    made.mutate("pods", "ns", "a", lambda edited: bool(edited["spec"].update(nodeName="n")) or True)
    with pytest.raises(ApiFailure) as raised:
        made.replace("pods", "ns", "a", created)
    assert raised.value.code == 409
    left = made.delete("pods", "ns", "a", grace_seconds=30)
    assert left is not None and left["metadata"]["deletionGracePeriodSeconds"] == 30
    assert made.find("pods", "ns", "a") is not None  # Terminating until its kubelet says its processes ended
    made.remove("pods", "ns", "a")
    assert made.find("pods", "ns", "a") is None


def test_names_namespaces_and_quantities_are_checked() -> None:
    made = store()
    with pytest.raises(ApiFailure) as raised:
        made.create("pods", "ns", pod("Bad_Name"))
    assert raised.value.code == 422 and raised.value.status()["details"]["causes"][0]["field"] == "metadata.name"
    with pytest.raises(ApiFailure) as raised:
        made.create("pods", "elsewhere", pod("a"))
    assert (raised.value.code, raised.value.message) == (404, 'namespaces "elsewhere" not found')
    bad = pod("q")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}  # type: ignore[index]
    with pytest.raises(ApiFailure) as raised:
        made.create("pods", "ns", bad)
    assert raised.value.code == 400


def test_selectors_patches_and_quantities() -> None:
    requirements = parse_label_selector("app in (a,b),tier!=db,!legacy")
    assert labels_match(requirements, {"metadata": {"labels": {"app": "a", "tier": "web"}}})
    assert not labels_match(requirements, {"metadata": {"labels": {"app": "a", "legacy": "1"}}})
    with pytest.raises(SelectorError):
        parse_label_selector("app in ()")
    assert merge_patch({"a": 1, "b": {"c": 2}}, {"b": {"c": None, "d": 3}}) == {"a": 1, "b": {"d": 3}}
    merged = strategic_merge_patch(
        {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
        {"containers": [{"name": "b", "image": "z"}, {"name": "a", "$patch": "delete"}]},
    )
    assert merged == {"containers": [{"name": "b", "image": "z"}]}
    assert json_patch({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 3}]) == {"a": [1, 2, 3]}
    assert parse_quantity("500m") == Fraction(1, 2) and parse_quantity("1.5Gi") == 1.5 * 2**30
    with pytest.raises(QuantityError):
        parse_quantity("two")


def test_the_scheduler_says_why_a_pod_does_not_fit() -> None:
    node = {"metadata": {"labels": {}}, "spec": {}, "status": {"allocatable": {"cpu": "2", "memory": "1Gi"}}}
    big = {"spec": {"containers": [{"resources": {"requests": {"cpu": "3", "memory": "2Gi"}}}]}}
    reasons = unschedulable_reasons(big, node, Resources())
    message = unschedulable_message(Counter(reasons), 1)
    assert message == "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
    tainted = {**node, "spec": {"taints": [{"key": "spot", "effect": "NoSchedule"}]}}
    assert unschedulable_reasons({"spec": {"containers": [{}]}}, tainted, Resources()) == [
        "node(s) had untolerated taint {spot: }"
    ]
    counted = Counter(["Insufficient cpu", "node(s) had untolerated taint {spot: }", "Insufficient cpu"])
    assert unschedulable_message(counted, 3) == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {spot: }, 2 Insufficient cpu."
    )
    tolerated = {"spec": {"containers": [{}], "tolerations": [{"key": "spot", "operator": "Exists"}]}}
    assert unschedulable_reasons(tolerated, tainted, Resources()) == []
