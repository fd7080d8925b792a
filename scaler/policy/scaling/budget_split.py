"""The cost policy's budget split per client or key (docs/guide/sharing.md, "Budgets per client or key").

With `max_cost_per_hour` B, each client with work gets a part of B: its key's own `max_cost_per_hour` from
`sharing.toml` when the administrator set one, else a part of what those leave, in proportion to its share among
the clients with work and without one (the weights of the fair shares). A client alone gets all of B.

The policy plans the pool for all the work, then caps what it costs (`CostScaling._capped`). The split lowers that
cap: each client is counted the planned spend in proportion to its tasks (running, and queued that could start),
and at most its part, but never less than one of the cheapest priced workers, so that no client's work stalls. The
cap is the sum, at most B. So a client with 100,000 queued tasks grows the pool only by its part while others have
work, even when they use less than theirs (the split is a limit, not a loan); which task runs on the pool is the
dispatch queue's (the shares). Busy workers are never stopped for it. Without a price (free workers) or without
clients in the snapshot, nothing is split. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scaler.policy.snapshot import ClientWork

ROUNDING = 1e-9


@dataclass(frozen=True, slots=True)
class HeldBack:
    """A client whose planned spend was over its part."""

    client_id: str
    part_per_hour: float  #: its part of the budget
    planned_per_hour: float  #: what the pool planned for its work would cost


def parts(budget: float, clients: Iterable[ClientWork]) -> dict[str, float]:
    """Each client with work: its part of the budget, its key's own, else by its share of what those leave."""
    working = [client for client in clients if client.tasks > 0]
    own = {client.client_id: client.max_cost_per_hour for client in working if client.max_cost_per_hour > 0}
    rest = max(0.0, budget - sum(own.values()))
    weights = {client.client_id: client.share for client in working if client.client_id not in own}
    total = sum(weights.values())
    return {**own, **{client_id: rest * weight / total for client_id, weight in weights.items()}}


def split_limit(
    budget: float, clients: tuple[ClientWork, ...], planned_per_hour: float, cheapest_per_hour: float
) -> tuple[float, tuple[HeldBack, ...]]:
    """The spend per hour the pool may reach with the budget split per client, and the clients it holds back."""
    part_of = parts(budget, clients)
    tasks = sum(client.tasks for client in clients if client.client_id in part_of)
    if not tasks:
        return budget, ()
    limit = 0.0
    held_back = []
    for client in clients:
        part = part_of.get(client.client_id)
        if part is None:
            continue
        planned = planned_per_hour * client.tasks / tasks
        allowed = min(planned, max(part, cheapest_per_hour))
        if allowed < planned - ROUNDING:
            held_back.append(HeldBack(client.client_id, part, planned))
        limit += allowed
    return min(budget, limit), tuple(held_back)


def note(held_back: tuple[HeldBack, ...]) -> str:
    """The words added to a trimmed manager's reason."""
    words = ", ".join(
        f"{item.client_id[-12:]} planned {item.planned_per_hour:.2f}/hour over its part {item.part_per_hour:.2f}"
        for item in held_back[:3]
    )
    more = f" and {len(held_back) - 3} more client(s)" if len(held_back) > 3 else ""
    return f"the budget is split per client: {words}{more}"
