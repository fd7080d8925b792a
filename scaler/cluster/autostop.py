"""When a `scaler FILE` stack stops by itself ([scaler] `idle_shutdown_seconds`, `no_client_shutdown_seconds`).

Pure: the scheduler's status snapshots and the time come in, a reason to stop (or None) goes out. Both clocks
start when the stack is up, so a stack nobody uses stops too. Stopping the stack stops its managers, which stop
their cloud units, and the hub: nothing is left billing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.protocol import messages as m


@dataclass
class AutoStop:
    idle_seconds: float  #: 0: never
    no_client_seconds: float  #: 0: never
    started_at: float
    _busy_at: float = field(init=False)
    _client_at: float = field(init=False)

    def __post_init__(self) -> None:
        self._busy_at = self._client_at = self.started_at

    @property
    def enabled(self) -> bool:
        return self.idle_seconds > 0 or self.no_client_seconds > 0

    def observe(self, snapshot: m.StatusSnapshot, now: float) -> None:
        stats = snapshot.scheduler
        if stats.queued or stats.running or any(client.tasks for client in snapshot.clients):
            self._busy_at = now
        if snapshot.clients:
            self._client_at = now

    def reason(self, now: float) -> str | None:
        if self.idle_seconds > 0 and now - self._busy_at >= self.idle_seconds:
            return f"no task queued or running for {self.idle_seconds:g} s (idle_shutdown_seconds)"
        if self.no_client_seconds > 0 and now - self._client_at >= self.no_client_seconds:
            return f"no client connected for {self.no_client_seconds:g} s (no_client_shutdown_seconds)"
        return None
