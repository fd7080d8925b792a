"""Who may do what on the rehearsal's API server: bearer tokens (the kubeconfig's, for the cluster's administrator;
a service account's, issued to its pods or through the TokenRequest API) and RBAC, as the real authorizer decides it
for service accounts (Roles and ClusterRoles bound to them by RoleBindings and ClusterRoleBindings; every rule's API
groups, resources or `resource/subresource`, verbs and resource names, with `*`). A refusal is the real server's
403 in its own words."""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from typing import Any

from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.store import Store

Object = dict[str, Any]
ADMIN_USER = "kubernetes-admin"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...]
    service_account: tuple[str, str] | None = None  #: (namespace, name)

    @property
    def is_admin(self) -> bool:
        return "system:masters" in self.groups


@dataclass(frozen=True, slots=True)
class Request:
    verb: str  #: get list watch create update patch delete deletecollection
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str


class Tokens:
    def __init__(self) -> None:
        self.admin_token = secrets.token_hex(24)
        self._lock = threading.Lock()
        self._accounts: dict[tuple[str, str], str] = {}
        self._users: dict[str, User] = {self.admin_token: User(ADMIN_USER, ("system:masters", "system:authenticated"))}

    def for_account(self, namespace: str, account: str) -> str:
        """The token of a service account (one per account, made when first asked for)."""
        with self._lock:
            token = self._accounts.get((namespace, account))
            if token is None:
                token = f"sa.{secrets.token_hex(24)}"
                self._accounts[(namespace, account)] = token
                groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated")
                self._users[token] = User(f"system:serviceaccount:{namespace}:{account}", groups, (namespace, account))
            return token

    def user_of(self, authorization: str | None) -> User | None:
        if not authorization or not authorization.startswith("Bearer "):
            return None
        return self._users.get(authorization[len("Bearer ") :].strip())


class Authorizer:
    def __init__(self, store: Store) -> None:
        self._store = store

    def check(self, user: User, request: Request) -> None:
        """Raises the 403 the real server answers when RBAC does not allow the request."""
        if user.is_admin or self._allowed(user, request):
            return
        resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
        qualified = f"{request.resource}.{request.group}" if request.group else request.resource
        subject = f'{qualified} "{request.name}"' if request.name else qualified
        where = f' in the namespace "{request.namespace}"' if request.namespace else " at the cluster scope"
        message = (
            f'{subject} is forbidden: User "{user.name}" cannot {request.verb} resource "{resource}" in API '
            f'group "{request.group}"{where}'
        )
        details: Object = {"kind": request.resource}
        if request.name:
            details["name"] = request.name
        if request.group:
            details["group"] = request.group
        raise ApiFailure(403, "Forbidden", message, details)

    def _allowed(self, user: User, request: Request) -> bool:
        bindings = [
            (b, request.namespace) for b in self._store.items("rolebindings", request.namespace) if request.namespace
        ]
        bindings += [(b, "") for b in self._store.items("clusterrolebindings")]
        for binding, namespace in bindings:
            if not any(_subject_is(subject, user, namespace) for subject in binding.get("subjects") or []):
                continue
            reference = binding.get("roleRef") or {}
            if reference.get("kind") == "Role":
                role = self._store.find("roles", namespace, reference.get("name", "")) if namespace else None
            else:
                role = self._store.find("clusterroles", "", reference.get("name", ""))
            if role is not None and any(_rule_allows(rule, request) for rule in role.get("rules") or []):
                return True
        return False


def _subject_is(subject: Object, user: User, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "ServiceAccount" and user.service_account is not None:
        namespace = subject.get("namespace") or binding_namespace
        return (namespace, subject.get("name")) == user.service_account
    if kind == "User":
        return bool(subject.get("name") == user.name)
    if kind == "Group":
        return subject.get("name") in user.groups
    return False


def _rule_allows(rule: Object, request: Request) -> bool:
    groups = rule.get("apiGroups") or []
    resources = rule.get("resources") or []
    verbs = rule.get("verbs") or []
    names = rule.get("resourceNames") or []
    resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    return (
        ("*" in groups or request.group in groups)
        and (
            "*" in resources
            or resource in resources
            or (bool(request.subresource) and f"{request.resource}/*" in resources)
        )
        and ("*" in verbs or request.verb in verbs)
        and (not names or request.name in names)
    )
