"""Which role an authorised CURVE key may take, and what each role may say it is.

No I/O but the folder's listing: a folder in, answers out. The servers' folder of authorised public keys
(`--curve-authorized-keys DIR`) says a key's role by where its file is:

- `DIR/NAME.key` or `DIR/clients/NAME.key`: a **client** (submits work; also what `scaler_top` and the dashboard
  need);
- `DIR/workers/NAME.key`: a **worker** pool (registers workers; the tasks it runs may open clients of their own);
- `DIR/managers/NAME.key`: a **worker manager** (registers as a manager and starts workers with its key);
- `DIR/monitors/NAME.key`: reads the monitor feed only.

A key in several folders has every role they give. The servers' own key pair (the scheduler connecting to its
object storage) has the `server` role. docs/security.md has the reasoning and the commands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from scaler.io.sockets import MONITOR_DOMAIN

CLIENT = "client"
WORKER = "worker"
MANAGER = "manager"
MONITOR = "monitor"
SERVER = "server"

#: subfolder of the authorised folder -> the role of the keys in it (keys at its top are clients)
ROLE_FOLDERS = {"clients": CLIENT, "workers": WORKER, "managers": MANAGER, "monitors": MONITOR}

#: a worker's processors link to the scheduler for their results, with their worker's keys (a hello's role)
PROCESSOR = "processor"

#: what a key of each role may register as with the scheduler (a hello's role)
_SCHEDULER_ROLES = {
    CLIENT: frozenset({CLIENT}),
    WORKER: frozenset({WORKER, PROCESSOR, CLIENT}),  # a task may open a client with its worker's keys (nested tasks)
    MANAGER: frozenset({MANAGER, WORKER, PROCESSOR, CLIENT}),  # a manager's workers connect with the manager's keys
    MONITOR: frozenset(),
    SERVER: frozenset({CLIENT, WORKER, PROCESSOR, MANAGER}),
}

#: what a key of each role may say it is to the object storage server (a storage hello's role)
_STORAGE_ROLES = {
    CLIENT: frozenset({"client", "readiness-probe"}),
    WORKER: frozenset({"client", "processor", "worker", "cache", "offload-proxy", "readiness-probe"}),
    MANAGER: frozenset({"client", "processor", "worker", "cache", "offload-proxy", "readiness-probe"}),
    MONITOR: frozenset(),
    SERVER: frozenset({"scheduler", "client", "processor", "worker", "cache", "offload-proxy", "readiness-probe"}),
}


def key_roles(folder: str, read_public_key: Callable[[str], bytes]) -> dict[bytes, frozenset[str]]:
    """Public key -> roles, from the `*.key` files at the top of `folder` and in its role subfolders.
    `read_public_key(path)` reads one file (it raises on a broken one)."""
    found: dict[bytes, set[str]] = {}
    top = Path(folder)
    places: list[tuple[Path, str]] = [(top, CLIENT)]
    places += [(top / name, role) for name, role in ROLE_FOLDERS.items() if (top / name).is_dir()]
    for place, role in places:
        for path in sorted(place.glob("*.key")):
            found.setdefault(read_public_key(str(path)), set()).add(role)
    return {key: frozenset(roles) for key, roles in found.items()}


def may_connect(roles: Iterable[str], domain: str) -> bool:
    """May a key with these roles finish a handshake on a socket of this ZAP domain?"""
    roles = frozenset(roles)
    if domain == MONITOR_DOMAIN:
        return bool(roles)
    return bool(roles - {MONITOR})


def scheduler_refusal(roles: frozenset[str], hello_role: str) -> str | None:
    """Why a key with `roles` may not register with the scheduler as `hello_role` (None: it may)."""
    allowed = frozenset().union(*(_SCHEDULER_ROLES.get(role, frozenset()) for role in roles))
    if hello_role in allowed:
        return None
    return _refusal(roles, hello_role)


def storage_refusal(roles: frozenset[str], hello_role: str) -> str | None:
    """Why a key with `roles` may not talk to the object storage as `hello_role` (None: it may)."""
    allowed = frozenset().union(*(_STORAGE_ROLES.get(role, frozenset()) for role in roles))
    if hello_role in allowed:
        return None
    return _refusal(roles, hello_role)


def _refusal(roles: frozenset[str], hello_role: str) -> str:
    if not roles:
        return "authentication: this connection's CURVE key is no longer authorised (it was revoked)"
    held = ", ".join(sorted(roles))
    where = {WORKER: "workers/", MANAGER: "managers/", CLIENT: "clients/ (or the top of the folder)"}
    kinds = {"worker": WORKER, "manager": MANAGER, "client": CLIENT, "processor": WORKER, "cache": WORKER}
    needed = kinds.get(hello_role)
    hint = f"; a {needed}'s public key goes in the authorised folder's {where[needed]}" if needed in where else ""
    return f"authentication: this CURVE key is authorised as {held}, which may not connect as a {hello_role}{hint}"
