"""The kinds the rehearsal's API server keeps: one record per kind (`Kind`), in one table (`KINDS`), with what the
discovery documents say of them, how their names are checked, their defaults and their validation."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaler_rehearsal.fake_kubernetes.validation import (
    FieldError,
    config_data_problems,
    invalid,
    pod_spec_problems,
    required,
    selector_map_problems,
)

Object = dict[str, Any]
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class Kind:
    plural: str
    kind: str
    group: str = ""  #: "" for the core group
    version: str = "v1"
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    name_rule: str = "subdomain"  #: validation.name_problems' rule
    subresources: tuple[str, ...] = ()  #: e.g. status, log, binding
    #: the object's own checks (beyond its metadata)
    validate: Callable[[Object], list[FieldError]] = lambda _obj: []
    #: fills what the server defaults (a pod's restart policy, grace period, pull policy ...)
    defaults: Callable[[Object], None] = lambda _obj: None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How error messages name the kind: `pods`, `deployments.apps`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def discovery(self) -> list[Object]:
        entry: Object = {
            "name": self.plural,
            "singularName": self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(ALL_VERBS),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        entries = [entry]
        for sub in self.subresources:
            verbs = {
                "status": ["get", "patch", "update"],
                "log": ["get"],
                "binding": ["create"],
                "token": ["create"],
                "eviction": ["create"],
                "scale": ["get", "patch", "update"],
            }[sub]
            sub_kind = {
                "log": "Pod",
                "binding": "Binding",
                "token": "TokenRequest",
                "eviction": "Eviction",
                "scale": "Scale",
            }.get(sub, self.kind)
            entries.append(
                {
                    "name": f"{self.plural}/{sub}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": sub_kind,
                    "verbs": verbs,
                }
            )
        return entries


# ---------------------------------------------------------------- defaults and checks per kind


def _default_pod(pod: Object) -> None:
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    for container in spec.get("containers") or []:
        if not isinstance(container, dict):
            continue
        image = str(container.get("image") or "")
        tag = image.rsplit("/", 1)[-1]
        untagged_or_latest = "@" not in image and (":" not in tag or tag.endswith(":latest"))
        container.setdefault("imagePullPolicy", "Always" if untagged_or_latest else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
        limits = container["resources"].get("limits") or {}
        if limits and not container["resources"].get("requests"):
            container["resources"]["requests"] = copy.deepcopy(limits)  # requests default to the limits
    pod.setdefault("status", {})
    pod["status"].setdefault("phase", "Pending")
    pod["status"].setdefault("qosClass", _qos_class(spec))


def _qos_class(spec: Object) -> str:
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        set((r.get("limits") or {}).keys()) >= {"cpu", "memory"}
        and all(str(v) == str((r.get("limits") or {}).get(k)) for k, v in (r.get("requests") or {}).items())
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _check_pod(pod: Object) -> list[FieldError]:
    return pod_spec_problems(pod.get("spec"))


def _check_config(obj: Object) -> list[FieldError]:
    errors = config_data_problems(obj.get("data") or {}, "data")
    if "binaryData" in obj:
        errors += config_data_problems(obj.get("binaryData") or {}, "binaryData")
    return errors


def _default_secret(secret: Object) -> None:
    secret.setdefault("type", "Opaque")
    string_data = secret.pop("stringData", None) or {}
    if string_data:
        import base64

        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def _check_secret(secret: Object) -> list[FieldError]:
    import base64
    import binascii

    errors = config_data_problems(secret.get("data") or {}, "data")
    for key, value in (secret.get("data") or {}).items():
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            errors.append(invalid(f"data[{key}]", "<value>", "illegal base64 data"))
    return errors


def _default_namespace(namespace: Object) -> None:
    namespace.setdefault("spec", {"finalizers": ["kubernetes"]})
    namespace.setdefault("status", {"phase": "Active"})
    labels = namespace["metadata"].setdefault("labels", {})
    labels.setdefault("kubernetes.io/metadata.name", namespace["metadata"].get("name", ""))


def _check_deployment(deployment: Object) -> list[FieldError]:
    spec = deployment.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    errors: list[FieldError] = []
    match_labels = (spec.get("selector") or {}).get("matchLabels")
    if not match_labels:
        errors.append(required("spec.selector"))
    else:
        errors += selector_map_problems(match_labels, "spec.selector.matchLabels")
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if match_labels and any(labels.get(key) != value for key, value in match_labels.items()):
        errors.append(invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`"))
    errors += pod_spec_problems(template.get("spec"), "spec.template.spec")
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or replicas < 0:
        errors.append(invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    return errors


def _default_deployment(deployment: Object) -> None:
    spec = deployment.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    spec.setdefault(
        "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    )
    template_spec = (spec.get("template") or {}).get("spec")
    if isinstance(template_spec, dict):
        _default_pod({"spec": template_spec, "metadata": {}})
    deployment.setdefault("status", {})


def _check_service(service: Object) -> list[FieldError]:
    ports = (service.get("spec") or {}).get("ports") or []
    errors = []
    for index, port in enumerate(ports):
        number = port.get("port") if isinstance(port, dict) else None
        if not isinstance(number, int) or not 0 < number < 65536:
            errors.append(invalid(f"spec.ports[{index}].port", number, "must be between 1 and 65535, inclusive"))
    return errors


def _default_service(service: Object) -> None:
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("clusterIP", "127.0.0.1")  # every pod runs on the laptop's network
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("sessionAffinity", "None")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    service.setdefault("status", {"loadBalancer": {}})


def _check_role(role: Object) -> list[FieldError]:
    errors = []
    for index, rule in enumerate(role.get("rules") or []):
        if not isinstance(rule, dict) or not rule.get("verbs"):
            errors.append(required(f"rules[{index}].verbs"))
    return errors


def _check_binding(binding: Object) -> list[FieldError]:
    reference = binding.get("roleRef") or {}
    errors = []
    if not reference.get("name"):
        errors.append(required("roleRef.name"))
    if reference.get("kind") not in ("Role", "ClusterRole"):
        errors.append(invalid("roleRef.kind", reference.get("kind", ""), "must be Role or ClusterRole"))
    return errors


_RBAC = "rbac.authorization.k8s.io"
KINDS: dict[str, Kind] = {
    kind.plural: kind
    for kind in (
        Kind(
            "pods",
            "Pod",
            short_names=("po",),
            subresources=("status", "log", "binding", "eviction"),
            validate=_check_pod,
            defaults=_default_pod,
        ),
        Kind("secrets", "Secret", validate=_check_secret, defaults=_default_secret),
        Kind("configmaps", "ConfigMap", short_names=("cm",), validate=_check_config),
        Kind("events", "Event", short_names=("ev",)),
        Kind(
            "namespaces",
            "Namespace",
            namespaced=False,
            short_names=("ns",),
            name_rule="label",
            subresources=("status",),
            defaults=_default_namespace,
        ),
        Kind("nodes", "Node", namespaced=False, short_names=("no",), subresources=("status",)),
        Kind("serviceaccounts", "ServiceAccount", short_names=("sa",), subresources=("token",)),
        Kind(
            "services",
            "Service",
            short_names=("svc",),
            name_rule="dns1035",
            subresources=("status",),
            validate=_check_service,
            defaults=_default_service,
        ),
        Kind(
            "deployments",
            "Deployment",
            group="apps",
            short_names=("deploy",),
            subresources=("status",),
            validate=_check_deployment,
            defaults=_default_deployment,
        ),
        Kind("leases", "Lease", group="coordination.k8s.io"),  # the kubelets' heartbeats (kube-node-lease)
        Kind("roles", "Role", group=_RBAC, validate=_check_role),
        Kind("rolebindings", "RoleBinding", group=_RBAC, validate=_check_binding),
        Kind("clusterroles", "ClusterRole", group=_RBAC, namespaced=False, validate=_check_role),
        Kind("clusterrolebindings", "ClusterRoleBinding", group=_RBAC, namespaced=False, validate=_check_binding),
    )
}

#: Kinds whose `status` is written only through their status subresource (the main resource ignores it).
STATUS_SUBRESOURCE = frozenset(kind.plural for kind in KINDS.values() if "status" in kind.subresources)
#: The group versions the server serves: (group, version) -> its kinds.
GROUP_VERSIONS: dict[tuple[str, str], list[Kind]] = {}
for _kind in KINDS.values():
    GROUP_VERSIONS.setdefault((_kind.group, _kind.version), []).append(_kind)


def kind_of(group: str, version: str, plural: str) -> Kind | None:
    kind = KINDS.get(plural)
    if kind is None or kind.group != group or kind.version != version:
        return None
    return kind
