"""Who may connect, and with which keys (docs/security.md, docs/guide/security.md).

- `find`: the one search for keys: `find_keys(role, address, explicit)` for every connecting side (a `FoundKeys`
  record that can be found again), `server_keys(settings, what)` for every server, `ServedAddresses`;
- `curve`: ZeroMQ CURVE for a component (`CurveSecurity`), from settings or the key text variables;
- `key_files`: reading and making key files; `key_folder`: the key pairs of a deployment (the user's keys, a
  cloud stack's, a local cluster's throw-away ones);
- `authorized_folder`, `roles`, `quotas`: the servers' folder of authorised keys, the role of each key, and the
  share and quotas the administrator set for it;
- `connection_files`: what a local server or stack publishes for the sides that connect to it (keys, the service
  at each address, a stack still starting);
- `handshake`: what a connecting side is told when a handshake fails (refused keys, the wrong port).
"""

from __future__ import annotations

from scaler.security.find import FoundKeys, ServerKeys, find_keys, server_keys
from scaler.security.key_files import KeyFileError

__all__ = ["FoundKeys", "KeyFileError", "ServerKeys", "find_keys", "server_keys"]
