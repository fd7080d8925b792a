"""What a pod's container starts with, from its pod spec only: its environment (the image's, the API server's and
Services' variables a kubelet injects, `envFrom`, `env` with `$(VAR)` references, values from Secrets, ConfigMaps and
the pod's own fields), its volumes written out to the pod's folder, and its command resolved on the image's PATH.

A local process cannot have a file system of its own, so a volume lives in the pod's folder and its mount path is
*mapped*: wherever the container's command, arguments, environment values or working folder name a mount path (or a
path under it), the kubelet writes the volume's folder instead. The service account's token volume, whose path
programs know by heart (/var/run/secrets/kubernetes.io/serviceaccount) rather than read from the spec, is also
given as a kubeconfig in the container's home (`~/.kube/config`), which every Kubernetes client reads next.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaler_rehearsal.fake_kubernetes.images import Image
from scaler_rehearsal.fake_kubernetes.quantity import QuantityError, parse_quantity
from scaler_rehearsal.fake_kubernetes.store import Store

Object = dict[str, Any]
SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
_REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


class ConfigError(Exception):
    """The container cannot be configured yet (`CreateContainerConfigError`): a Secret or ConfigMap, or a key of one,
    that does not exist."""


@dataclass(frozen=True, slots=True)
class ApiAccess:
    """How a pod reaches the API server: its address and CA, and a token for a service account."""

    host: str
    port: int
    ca_pem: str
    token_for: Callable[[str, str], str]  #: (namespace, service account) -> a bearer token


@dataclass
class ContainerStart:
    argv: list[str]
    environment: dict[str, str]
    cwd: Path
    mapped: dict[str, Path] = field(default_factory=dict)  #: mount path -> the local folder standing for it


def expand(text: str, variables: Mapping[str, str]) -> str:
    """`$(VAR)` -> its value when defined (else left as it is), `$$` -> `$`, as the kubelet expands them."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return variables[name] if name in variables else match.group(0)

    return _REFERENCE.sub(replace, text)


def map_paths(text: str, mapped: Mapping[str, Path]) -> str:
    for mount_path in sorted(mapped, key=len, reverse=True):
        pattern = re.compile(re.escape(mount_path.rstrip("/")) + r"(?=/|$|[\s\"',:;])")
        text = pattern.sub(str(mapped[mount_path]).replace("\\", "\\\\"), text)
    return text


class PodEnvironment:
    def __init__(self, store: Store, access: ApiAccess) -> None:
        self._store = store
        self._access = access

    def prepare(self, pod: Object, container: Object, image: Image, folder: Path) -> ContainerStart:
        """Raises ConfigError (a missing Secret, ConfigMap or key) or FileNotFoundError (a command not on the
        image's PATH, in the container runtime's words)."""
        namespace = pod["metadata"]["namespace"]
        mapped = self._volumes(pod, container, folder)
        home = folder / "home"
        home.mkdir(parents=True, exist_ok=True)
        (folder / "tmp").mkdir(exist_ok=True)
        path = os.pathsep.join(str(entry) for entry in image.path)
        variables: dict[str, str] = {"PATH": path, **dict(image.environment)}
        variables["HOSTNAME"] = pod["metadata"]["name"]
        variables["HOME"], variables["TMPDIR"] = str(home), str(folder / "tmp")
        variables.update(self._api_variables())
        if pod["spec"].get("enableServiceLinks", True):
            variables.update(self._service_variables(namespace))
        for source in container.get("envFrom") or []:
            variables.update(self._env_from(namespace, source))
        for variable in container.get("env") or []:
            value = self._value(pod, container, variable, variables)
            if value is not None:
                variables[variable["name"]] = map_paths(value, mapped)
        if pod["spec"].get("automountServiceAccountToken", True) is not False:
            self._write_kubeconfig(home, namespace, pod["spec"].get("serviceAccountName", "default"))
        argv = [
            map_paths(expand(part, variables), mapped)
            for part in [*(container.get("command") or []), *(container.get("args") or [])]
        ]
        if not container.get("command"):
            raise FileNotFoundError(
                "failed to create containerd task: the image has no entrypoint: no command specified"
            )
        argv[0] = self._resolve(argv[0], path)
        cwd = folder / "work"
        if container.get("workingDir"):
            working = map_paths(str(container["workingDir"]), mapped)
            cwd = Path(working) if working != container["workingDir"] else folder / "rootfs" / working.lstrip("/")
        cwd.mkdir(parents=True, exist_ok=True)
        return ContainerStart(argv, variables, cwd, mapped)

    # ------------------------------------------------------------ environment

    def _api_variables(self) -> dict[str, str]:
        host, port = self._access.host, str(self._access.port)
        return {
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": port,
            "KUBERNETES_SERVICE_PORT_HTTPS": port,
            "KUBERNETES_PORT": f"tcp://{host}:{port}",
            f"KUBERNETES_PORT_{port}_TCP": f"tcp://{host}:{port}",
        }

    def _service_variables(self, namespace: str) -> dict[str, str]:
        """`<NAME>_SERVICE_HOST` and `_PORT` of the namespace's Services: every pod runs on the laptop's network, so a
        Service's address is the laptop's and its port the pods' target port."""
        variables: dict[str, str] = {}
        for service in self._store.items("services", namespace):
            prefix = service["metadata"]["name"].upper().replace("-", "_")
            host = (service.get("spec") or {}).get("clusterIP") or "127.0.0.1"
            ports = (service.get("spec") or {}).get("ports") or []
            if not ports:
                continue
            for index, port in enumerate(ports):
                target = port.get("targetPort", port.get("port"))
                number = str(target if isinstance(target, int) else port.get("port"))
                if index == 0:
                    variables[f"{prefix}_SERVICE_HOST"] = host
                    variables[f"{prefix}_SERVICE_PORT"] = number
                    variables[f"{prefix}_PORT"] = f"tcp://{host}:{number}"
                if port.get("name"):
                    variables[f"{prefix}_SERVICE_PORT_{str(port['name']).upper().replace('-', '_')}"] = number
        return variables

    def _data(self, plural: str, namespace: str, name: str, optional: bool) -> dict[str, str] | None:
        found = self._store.find(plural, namespace, name)
        if found is None:
            if optional:
                return None
            raise ConfigError(f'{"secret" if plural == "secrets" else "configmap"} "{name}" not found')
        if plural == "secrets":
            return {
                key: base64.b64decode(value).decode(errors="replace")
                for key, value in (found.get("data") or {}).items()
            }
        return {key: str(value) for key, value in (found.get("data") or {}).items()}

    def _env_from(self, namespace: str, source: Object) -> dict[str, str]:
        prefix = source.get("prefix", "")
        for key, plural in (("configMapRef", "configmaps"), ("secretRef", "secrets")):
            if key in source:
                reference = source[key]
                data = self._data(plural, namespace, reference.get("name", ""), bool(reference.get("optional")))
                return {prefix + name: value for name, value in (data or {}).items()}
        return {}

    def _value(self, pod: Object, container: Object, variable: Object, defined: dict[str, str]) -> str | None:
        if "valueFrom" not in variable:
            return expand(str(variable.get("value", "")), defined)
        source = variable["valueFrom"]
        namespace = pod["metadata"]["namespace"]
        for key, plural, kind in (
            ("secretKeyRef", "secrets", "Secret"),
            ("configMapKeyRef", "configmaps", "ConfigMap"),
        ):
            if key in source:
                reference = source[key]
                optional = bool(reference.get("optional"))
                data = self._data(plural, namespace, reference.get("name", ""), optional)
                if data is None:
                    return None
                if reference.get("key") not in data:
                    if optional:
                        return None
                    raise ConfigError(
                        f"couldn't find key {reference.get('key')} in {kind} {namespace}/{reference.get('name')}"
                    )
                return data[reference["key"]]
        if "fieldRef" in source:
            return _field_value(pod, str(source["fieldRef"].get("fieldPath", "")))
        if "resourceFieldRef" in source:
            return _resource_value(container, source["resourceFieldRef"])
        return ""

    # ------------------------------------------------------------ volumes

    def _volumes(self, pod: Object, container: Object, folder: Path) -> dict[str, Path]:
        namespace = pod["metadata"]["namespace"]
        volumes = {volume["name"]: volume for volume in pod["spec"].get("volumes") or []}
        written: dict[str, Path] = {}
        for name, volume in volumes.items():
            target = folder / "volumes" / name
            if "secret" in volume or "configMap" in volume:
                plural, source = (
                    ("secrets", volume["secret"]) if "secret" in volume else ("configmaps", volume["configMap"])
                )
                data = self._data(
                    plural, namespace, source.get("secretName") or source.get("name", ""), bool(source.get("optional"))
                )
                _write_files(target, data or {}, source.get("items"), int(source.get("defaultMode", 0o644)))
            else:  # emptyDir, and hostPath: a folder of the pod's own (nothing of the laptop's)
                target.mkdir(parents=True, exist_ok=True)
            written[name] = target
        mapped = {
            str(mount["mountPath"]): written[mount["name"]] / mount.get("subPath", "")
            for mount in container.get("volumeMounts") or []
            if mount.get("name") in written
        }
        if pod["spec"].get("automountServiceAccountToken", True) is not False:
            account = folder / "volumes" / "kube-api-access"
            token = self._access.token_for(namespace, pod["spec"].get("serviceAccountName", "default"))
            _write_files(account, {"token": token, "ca.crt": self._access.ca_pem, "namespace": namespace}, None, 0o644)
            mapped.setdefault(SERVICE_ACCOUNT_PATH, account)
        return mapped

    def _write_kubeconfig(self, home: Path, namespace: str, account: str) -> None:
        access = self._access
        ca = base64.b64encode(access.ca_pem.encode()).decode()
        token = access.token_for(namespace, account)
        text = (
            "apiVersion: v1\nkind: Config\nclusters:\n- name: in-cluster\n  cluster:\n"
            f"    server: https://{access.host}:{access.port}\n    certificate-authority-data: {ca}\n"
            f"users:\n- name: {account}\n  user:\n    token: {token}\n"
            f"contexts:\n- name: in-cluster\n  context:\n    cluster: in-cluster\n    user: {account}\n"
            f"    namespace: {namespace}\ncurrent-context: in-cluster\n"
        )
        (home / ".kube").mkdir(parents=True, exist_ok=True)
        config = home / ".kube" / "config"
        config.write_text(text)
        config.chmod(0o600)

    # ------------------------------------------------------------ the command

    @staticmethod
    def _resolve(command: str, path: str) -> str:
        """`command` on the image's PATH (an absolute path by its last component: the laptop's files are not the
        image's)."""
        name = command.rsplit("/", 1)[-1] if command.startswith("/") else command
        found = shutil.which(name, path=path) if "/" not in name else None
        if found is None:
            raise FileNotFoundError(
                "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
                f'failed: unable to start container process: exec: "{command}": executable file not found in $PATH: '
                "unknown"
            )
        return found


def _write_files(target: Path, data: Mapping[str, str], items: list[Object] | None, mode: int) -> None:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    chosen: list[tuple[str, str, Any]] = [
        (str(item["key"]), str(item.get("path", item["key"])), item.get("mode", mode)) for item in items or []
    ] or [(key, key, mode) for key in data]
    for key, relative, file_mode in chosen:
        if key not in data:
            continue
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data[key])
        path.chmod(int(file_mode) & 0o777 or 0o644)


def _field_value(pod: Object, path: str) -> str:
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    values = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": status.get("hostIP", "127.0.0.1"),
        "status.podIP": status.get("podIP", "127.0.0.1"),
    }
    if path in values:
        return str(values[path])
    match = re.match(r"^metadata\.(labels|annotations)\['(.+)'\]$", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    return ""


def _resource_value(container: Object, reference: Object) -> str:
    resource = str(reference.get("resource", ""))
    section, _, name = resource.partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(name)
    if value is None:
        return "0"
    try:
        amount = parse_quantity(value)
        divisor = parse_quantity(reference.get("divisor", "1"))
    except QuantityError:
        return str(value)
    from math import ceil

    return str(ceil(amount / divisor)) if divisor else str(value)
