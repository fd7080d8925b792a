"""What the API server checks in an object before it stores it, in its own words: names (RFC 1123), labels and
annotations, and the parts of a pod spec the rehearsal runs (containers, images, resources, restart policy, env,
volumes). Each problem is a `FieldError`; `store.invalid` turns them into the 422 Status the real server answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scaler_rehearsal.fake_kubernetes.quantity import QuantityError, parse_quantity

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation "
    "is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
QUALIFIED_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation "
    "is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
ENV_MESSAGE = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not "
    "start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is "
    "'[-._a-zA-Z][-._a-zA-Z0-9]*')"
)
RESTART_POLICIES = ("Always", "OnFailure", "Never")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str
    reason: str  #: FieldValueRequired, FieldValueInvalid, FieldValueNotSupported, FieldValueDuplicate, ...
    detail: str  #: the cause's message ("Required value", 'Invalid value: "x": ...')

    def text(self) -> str:
        return f"{self.field}: {self.detail}"


def required(field: str) -> FieldError:
    return FieldError(field, "FieldValueRequired", "Required value")


def invalid(field: str, value: object, why: str) -> FieldError:
    shown = f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
    return FieldError(field, "FieldValueInvalid", f"Invalid value: {shown}: {why}")


def not_supported(field: str, value: object, supported: Iterable[str]) -> FieldError:
    options = ", ".join(f'"{option}"' for option in supported)
    return FieldError(field, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {options}')


def duplicate(field: str, value: str) -> FieldError:
    return FieldError(field, "FieldValueDuplicate", f'Duplicate value: "{value}"')


def not_found(field: str, value: str) -> FieldError:
    return FieldError(field, "FieldValueNotFound", f'Not found: "{value}"')


def forbidden(field: str, why: str) -> FieldError:
    return FieldError(field, "FieldValueForbidden", f"Forbidden: {why}")


# ---------------------------------------------------------------- names, labels, annotations


def name_problems(name: str, field: str, rule: str = "subdomain") -> list[FieldError]:
    """`rule`: subdomain (most kinds), label (namespaces), dns1035 (services)."""
    pattern, message, limit = {
        "subdomain": (DNS1123_SUBDOMAIN, SUBDOMAIN_MESSAGE, 253),
        "label": (DNS1123_LABEL, LABEL_MESSAGE, 63),
        "dns1035": (DNS1035_LABEL, DNS1035_MESSAGE, 63),
    }[rule]
    errors = []
    if len(name) > limit:
        errors.append(invalid(field, name, f"must be no more than {limit} characters"))
    if not pattern.match(name):
        errors.append(invalid(field, name, message))
    return errors


def qualified_name_problems(key: str, field: str) -> list[FieldError]:
    """A label or annotation key: `[prefix/]name`, the prefix a DNS subdomain, the name at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    errors: list[FieldError] = []
    if slash and not prefix:
        errors.append(invalid(field, key, "prefix part must be non-empty"))
    elif slash and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        errors.append(invalid(field, key, f"prefix part {SUBDOMAIN_MESSAGE}"))
    if not name:
        errors.append(invalid(field, key, "name part must be non-empty"))
    elif len(name) > 63:
        errors.append(invalid(field, key, "name part must be no more than 63 characters"))
    elif not QUALIFIED_NAME.match(name):
        errors.append(invalid(field, key, QUALIFIED_MESSAGE))
    return errors


def metadata_problems(metadata: Mapping[str, Any], name_rule: str) -> list[FieldError]:
    errors: list[FieldError] = []
    name = metadata.get("name")
    if not name:
        errors.append(
            FieldError("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")
        )
    elif not isinstance(name, str):
        errors.append(invalid("metadata.name", name, "must be a string"))
    else:
        errors.extend(name_problems(name, "metadata.name", name_rule))
    labels = metadata.get("labels") or {}
    if not isinstance(labels, dict):
        return [*errors, invalid("metadata.labels", labels, "must be a map of strings")]
    for key, value in labels.items():
        errors.extend(qualified_name_problems(key, "metadata.labels"))
        if not isinstance(value, str):
            errors.append(invalid(f"metadata.labels[{key}]", value, "must be a string"))
        elif len(value) > 63:
            errors.append(invalid("metadata.labels", value, "must be no more than 63 characters"))
        elif not LABEL_VALUE.match(value):
            errors.append(invalid("metadata.labels", value, LABEL_VALUE_MESSAGE))
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, dict):
        return [*errors, invalid("metadata.annotations", annotations, "must be a map of strings")]
    for key in annotations:
        errors.extend(qualified_name_problems(key, "metadata.annotations"))
    if sum(len(key) + len(str(value)) for key, value in annotations.items()) > 256 * 1024:
        errors.append(
            FieldError("metadata.annotations", "FieldValueTooLong", "Too long: must have at most 262144 bytes")
        )
    return errors


def selector_map_problems(selector: object, field: str) -> list[FieldError]:
    """A map of labels that must match (a node selector, a Deployment's matchLabels)."""
    if not isinstance(selector, dict):
        return [invalid(field, selector, "must be a map of strings")]
    errors = []
    for key, value in selector.items():
        errors.extend(qualified_name_problems(key, field))
        if not isinstance(value, str) or not LABEL_VALUE.match(value) or len(value) > 63:
            errors.append(invalid(field, value, LABEL_VALUE_MESSAGE))
    return errors


# ---------------------------------------------------------------- pods


def pod_spec_problems(spec: object, field: str = "spec") -> list[FieldError]:
    if not isinstance(spec, dict):
        return [required(field)]
    errors, volume_names = _volume_problems(spec.get("volumes") or [], field)
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        errors.append(required(f"{field}.containers"))
        containers = []
    names: set[str] = set()
    for index, container in enumerate(containers):
        errors.extend(container_problems(container, f"{field}.containers[{index}]", names, volume_names))
    policy = spec.get("restartPolicy", "Always")
    if policy not in RESTART_POLICIES:
        errors.append(not_supported(f"{field}.restartPolicy", policy, RESTART_POLICIES))
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None and (not isinstance(grace, int) or grace < 0):
        errors.append(invalid(f"{field}.terminationGracePeriodSeconds", grace, "must be greater than or equal to 0"))
    if "nodeSelector" in spec:
        errors.extend(selector_map_problems(spec["nodeSelector"] or {}, f"{field}.nodeSelector"))
    account = spec.get("serviceAccountName")
    if account:
        errors.extend(name_problems(account, f"{field}.serviceAccountName", "subdomain"))
    for index, toleration in enumerate(spec.get("tolerations") or []):
        operator = toleration.get("operator", "Equal") if isinstance(toleration, dict) else ""
        if operator not in ("Equal", "Exists"):
            errors.append(not_supported(f"{field}.tolerations[{index}].operator", operator, ("Equal", "Exists")))
    return errors


def _volume_problems(volumes: object, field: str) -> tuple[list[FieldError], set[str]]:
    errors: list[FieldError] = []
    names: set[str] = set()
    for index, volume in enumerate(volumes if isinstance(volumes, list) else []):
        name = volume.get("name", "") if isinstance(volume, dict) else ""
        where = f"{field}.volumes[{index}].name"
        if not name:
            errors.append(required(where))
        elif name in names:
            errors.append(duplicate(where, name))
        else:
            errors.extend(name_problems(name, where, "label"))
            names.add(name)
    return errors, names


def container_problems(container: object, field: str, names: set[str], volumes: set[str]) -> list[FieldError]:
    if not isinstance(container, dict):
        return [required(field)]
    errors: list[FieldError] = []
    name = container.get("name")
    if not name:
        errors.append(required(f"{field}.name"))
    elif name in names:
        errors.append(duplicate(f"{field}.name", name))
    else:
        names.add(name)
        errors.extend(name_problems(name, f"{field}.name", "label"))
    image = container.get("image")
    if not image:
        errors.append(required(f"{field}.image"))
    elif not isinstance(image, str) or image != image.strip():
        errors.append(invalid(f"{field}.image", image, "must not have leading or trailing whitespace"))
    policy = container.get("imagePullPolicy")
    if policy is not None and policy not in PULL_POLICIES:
        errors.append(not_supported(f"{field}.imagePullPolicy", policy, PULL_POLICIES))
    errors.extend(resources_problems(container.get("resources") or {}, f"{field}.resources"))
    return errors + _env_and_mount_problems(container, field, volumes)


def _env_and_mount_problems(container: dict[str, Any], field: str, volumes: set[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, variable in enumerate(container.get("env") or []):
        variable_name = variable.get("name", "") if isinstance(variable, dict) else ""
        if not variable_name:
            errors.append(required(f"{field}.env[{index}].name"))
        elif not ENV_NAME.match(variable_name):
            errors.append(invalid(f"{field}.env[{index}].name", variable_name, ENV_MESSAGE))
    for index, mount in enumerate(container.get("volumeMounts") or []):
        mount_name = mount.get("name", "") if isinstance(mount, dict) else ""
        if mount_name not in volumes:
            errors.append(not_found(f"{field}.volumeMounts[{index}].name", mount_name))
        if not (mount.get("mountPath") if isinstance(mount, dict) else None):
            errors.append(required(f"{field}.volumeMounts[{index}].mountPath"))
    return errors


def quantity_problem(requirements: Mapping[str, Any]) -> str | None:
    """The decoder's complaint about a malformed quantity (answered 400, before any validation), or None."""
    for section in ("requests", "limits"):
        for value in (requirements.get(section) or {}).values():
            try:
                parse_quantity(value)
            except QuantityError as error:
                return str(error)
    return None


def resources_problems(requirements: Mapping[str, Any], field: str) -> list[FieldError]:
    errors: list[FieldError] = []
    requests, limits = requirements.get("requests") or {}, requirements.get("limits") or {}
    for section, values in (("requests", requests), ("limits", limits)):
        for resource, value in values.items():
            try:
                amount = parse_quantity(value)
            except QuantityError:
                continue  # answered 400 by quantity_problem
            if amount < 0:
                errors.append(invalid(f"{field}.{section}[{resource}]", value, "must be greater than or equal to 0"))
    for resource, value in requests.items():
        if resource in limits:
            try:
                if parse_quantity(value) > parse_quantity(limits[resource]):
                    errors.append(
                        invalid(
                            f"{field}.requests",
                            value,
                            f"must be less than or equal to {resource} limit of {limits[resource]}",
                        )
                    )
            except QuantityError:
                continue
    return errors


#: What may change in a pod's spec after its creation (everything else is forbidden, as on a real server).
MUTABLE_POD_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")


def pod_update_problems(old_spec: Mapping[str, Any], new_spec: Mapping[str, Any]) -> list[FieldError]:
    """A pod's spec is immutable but for its containers' images, its tolerations and its active deadline."""

    def comparable(spec: Mapping[str, Any]) -> dict[str, Any]:
        kept = {key: value for key, value in spec.items() if key not in MUTABLE_POD_SPEC}
        kept["containers"] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get("containers") or []]
        return kept

    if comparable(old_spec) != comparable(new_spec):
        return [
            forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`, "
                "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                "additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set "
                "to 1 if it was previously negative)",
            )
        ]
    return []


def config_data_problems(data: object, field: str) -> list[FieldError]:
    """The keys of a Secret's or ConfigMap's data."""
    if not isinstance(data, dict):
        return [invalid(field, data, "must be a map")]
    errors = []
    for key in data:
        if not CONFIG_KEY.match(key) or len(key) > 253:
            errors.append(
                invalid(
                    field,
                    key,
                    "a valid config key must consist of alphanumeric characters, '-', '_' "
                    "or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                    "validation is '[-._a-zA-Z0-9]+')",
                )
            )
    return errors
