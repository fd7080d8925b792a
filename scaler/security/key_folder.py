"""A folder of the CURVE key pairs one deployment needs, made at first use where only the user can read them.

The layout (docs/guide/security.md): `server.key`/`server.key_secret` (the scheduler and the object storage),
`client.key`/`.key_secret` (clients, `scaler_top`, the dashboard), `workers.key`/`.key_secret` (workers and worker
managers), and `authorized/`, the servers' folder of authorised keys: `authorized/client.key` (a client) and
`authorized/managers/workers.key` (a manager, which also covers the workers it starts).

Two places use it: the *user's keys* `~/.config/scaler/keys/` (respecting XDG_CONFIG_HOME), which a server started
without any key setting uses (`find`), and each cloud stack's `~/.config/scaler/stacks/<name>/` (`stack_keys`).
`ClusterKeys` are the throw-away keys of one `SchedulerClusterCombo(secure=True)`.
The folder is made whole in a private temporary folder beside it and renamed into place, so two servers starting
at once agree on one set of keys.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaler.security.curve import CurveSecurity, curve_security
from scaler.security.key_files import KeyFileError, make_key_pair

PAIRS = ("server", "client", "workers")
#: which pair a connecting side of each kind uses
PAIR_OF_ROLE = {"client": "client", "worker": "workers"}


def config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "scaler"


@dataclass(frozen=True)
class KeyFolder:
    """The key pairs of one deployment, in a folder of mode 0700 (secret files 0600)."""

    folder: Path

    @classmethod
    def ensure(cls, folder: Path) -> KeyFolder:
        """The keys in `folder`, made the first time. Raises KeyFileError when the folder exists without them."""
        if not (folder / "server.key_secret").is_file():
            _make(folder)
        os.chmod(folder, 0o700)
        return cls(folder)

    def path(self, name: str) -> str:
        return str(self.folder / name)

    def authorized_texts(self) -> dict[str, str]:
        """The authorised folder as {relative path: public key file text} (what a cloud scheduler is given)."""
        root = self.folder / "authorized"
        return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob("*.key"))}

    def server_settings(self) -> dict[str, str]:
        return {"curve_secret_key": self.path("server.key_secret"), "curve_authorized_keys": self.path("authorized")}

    def connecting_settings(self, role: str) -> dict[str, str]:
        """The key settings of a connecting side: role "client" or "worker" (managers use the workers' pair)."""
        pair = PAIR_OF_ROLE[role]
        return {"curve_secret_key": self.path(f"{pair}.key_secret"), "curve_server_key": self.path("server.key")}

    def export(self, directory: Path, role: str) -> tuple[Path, Path]:
        """Copy the server's public key and the pair of `role` into `directory` (made with mode 0700; the secret
        0600), for a machine that connects from elsewhere; (secret key file, server key file). Raises
        FileExistsError rather than overwrite a secret key file."""
        pair = PAIR_OF_ROLE[role]
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        secret, server = directory / f"{pair}.key_secret", directory / "server.key"
        if secret.exists():
            raise FileExistsError(f"{secret} exists; remove it first, or export into another folder")
        shutil.copyfile(self.folder / "server.key", server)
        shutil.copyfile(self.folder / f"{pair}.key", directory / f"{pair}.key")
        descriptor = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others
        with os.fdopen(descriptor, "wb") as file:
            file.write((self.folder / f"{pair}.key_secret").read_bytes())
        return secret, server

    def server_security(self) -> CurveSecurity:
        security = curve_security(self.path("server.key_secret"), None, self.path("authorized"))
        assert security is not None
        return security

    def connecting_security(self, role: str) -> CurveSecurity:
        settings = self.connecting_settings(role)
        security = curve_security(settings["curve_secret_key"], settings["curve_server_key"])
        assert security is not None
        return security


def user_keys() -> KeyFolder:
    """The user's keys (`$XDG_CONFIG_HOME/scaler/keys`, else `~/.config/scaler/keys`), made at first use. Raises
    KeyFileError naming the folder when they can be neither read nor made (a read-only or foreign home)."""
    folder = config_home() / "keys"
    try:
        return KeyFolder.ensure(folder)
    except OSError as error:
        raise KeyFileError(
            f"{folder}: cannot read or make the user's CURVE keys ({error}); set XDG_CONFIG_HOME to a folder of "
            "yours, give key files (--curve-secret-key ...), or serve plain TCP with --insecure"
        ) from None


def _make(folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".partial", dir=folder.parent))  # mode 0700
    try:
        for pair in PAIRS:
            make_key_pair(str(partial), pair)
        (partial / "authorized" / "managers").mkdir(parents=True)
        shutil.copyfile(partial / "client.key", partial / "authorized" / "client.key")
        shutil.copyfile(partial / "workers.key", partial / "authorized" / "managers" / "workers.key")
        try:
            os.rename(partial, folder)  # atomic; fails when another process made the folder first
        except OSError:
            pass
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    if not (folder / "server.key_secret").is_file():
        raise KeyFileError(f"{folder}: exists without the keys scaler makes there (server.key_secret); remove it")


def stack_keys(name: str) -> KeyFolder:
    """The keys of cloud stack `name`, made the first time (server, client and workers pairs; the client authorised
    as a client, the workers' pair as managers, which also covers the workers they start)."""
    return KeyFolder.ensure(config_home() / "stacks" / name)


class ClusterKeys:
    """Throw-away keys of one local cluster (`SchedulerClusterCombo(secure=True)`): a server pair, a client pair
    and a workers pair in a private temporary folder, the client authorised as a client, the workers as managers
    (and so as workers)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @classmethod
    def make(cls) -> ClusterKeys:
        folder = tempfile.mkdtemp(prefix="scaler-keys-")
        for name in ("server", "client", "workers"):
            make_key_pair(os.path.join(folder, "pairs"), name)
        authorized = os.path.join(folder, "authorized")
        os.makedirs(authorized)
        os.makedirs(os.path.join(authorized, "managers"))  # the workers' pair serves managers and their workers
        os.link(os.path.join(folder, "pairs", "client.key"), os.path.join(authorized, "client.key"))
        os.link(os.path.join(folder, "pairs", "workers.key"), os.path.join(authorized, "managers", "workers.key"))
        return cls(folder)

    def _pair(self, name: str) -> str:
        return os.path.join(self.folder, "pairs", name)

    def server_settings(self) -> dict[str, Any]:
        return {
            "curve_secret_key": self._pair("server.key_secret"),
            "curve_authorized_keys": os.path.join(self.folder, "authorized"),
        }

    def worker_settings(self) -> dict[str, Any]:
        return {"curve_secret_key": self._pair("workers.key_secret"), "curve_server_key": self._pair("server.key")}

    def client_settings(self) -> dict[str, str]:
        return {"curve_secret_key": self._pair("client.key_secret"), "curve_server_key": self._pair("server.key")}

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
