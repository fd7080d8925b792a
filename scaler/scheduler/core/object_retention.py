"""When a departed client's objects are deleted: `object_retention_seconds` after it left, on the core's clock.

A client that registers again within that time keeps its objects (it had not left for good); a cluster
shutdown deletes every object still kept. Zero means "at once".
"""

from __future__ import annotations

from scaler.protocol.ids import ClientID


class ObjectRetention:
    def __init__(self, retention_seconds: float) -> None:
        self.retention_seconds = retention_seconds
        self._until: dict[ClientID, float] = {}  #: departed client -> when its objects go

    def client_left(self, client: ClientID, now: float) -> bool:
        """Note a departure; True when its objects must go at once (no retention)."""
        if self.retention_seconds <= 0:
            return True
        self._until[client] = now + self.retention_seconds
        return False

    def client_back(self, client: ClientID) -> bool:
        """A client registered: True when it came back within its retention time (its objects stay)."""
        return self._until.pop(client, None) is not None

    def due(self, now: float) -> list[ClientID]:
        """The clients whose retention ended by `now`, each returned once."""
        owners = [client for client, until in self._until.items() if now >= until]
        for client in owners:
            del self._until[client]
        return owners

    def all_kept(self) -> list[ClientID]:
        """Every client whose objects are still kept, forgotten here (the cluster is shutting down)."""
        owners = list(self._until)
        self._until.clear()
        return owners
