"""When a departed client's objects are deleted: `retention_seconds` after it left (object_retention_seconds).

Deleting later rather than at once keeps a client's objects for a client that comes back with the same
identity in time, and also catches results that its cancelled tasks still stored after it left.
"""

from __future__ import annotations

from scaler.protocol.ids import ClientID


class ObjectRetention:
    def __init__(self, retention_seconds: float) -> None:
        self.retention_seconds = retention_seconds
        self._due: dict[ClientID, float] = {}  #: departed client -> `now` at which its objects go

    def client_left(self, client: ClientID, now: float) -> None:
        self._due[client] = now + self.retention_seconds

    def client_back(self, client: ClientID) -> None:
        self._due.pop(client, None)

    def due(self, now: float | None) -> list[ClientID]:
        """The clients whose objects are to be deleted now (None: all of them); each is returned once."""
        gone = [client for client, at in self._due.items() if now is None or at <= now]
        for client in gone:
            del self._due[client]
        return gone
