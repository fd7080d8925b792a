"""Task counts by state, kept up to date as tasks move: in total, per connected client, per function.

The view shows them every second; keeping them as tasks move costs a few increments per transition,
where counting would walk every live task per view. Invariants (checked by the simulation):
- each live-state column of `total` equals the number of live records in that state;
- a client's row covers the tasks it submitted since it connected, until it leaves (rows of departed
  clients are dropped, and their tasks' later moves are not counted per client);
- at most `MAX_FUNCTIONS` function names get a row of their own; later ones share `OTHER_FUNCTIONS`.
"""

from __future__ import annotations

from scaler.protocol.feed import FunctionEntry, TaskCounts, TaskStatus
from scaler.protocol.ids import ClientID

MAX_FUNCTIONS = 1000
OTHER_FUNCTIONS = "(other functions)"

_COLUMN = {status: index for index, status in enumerate(TaskStatus)}
_NOT_FOUND = len(_COLUMN)
_WIDTH = _NOT_FOUND + 1

#: one count per TaskStatus, in enum order, then the not-found cancels (TaskCounts' field order)
Row = list[int]


class TaskTally:
    def __init__(self) -> None:
        self.total: Row = [0] * _WIDTH
        self.by_client: dict[ClientID, Row] = {}
        self.by_function: dict[str, Row] = {}

    def moved(self, client: ClientID | None, function: str, before: TaskStatus | None, after: TaskStatus) -> None:
        """A task entered `after` (from `before`, None for a new task). `client` None: not counted per client."""
        rows = self.by_function
        function_row = rows.get(function)
        if function_row is None:
            if len(rows) >= MAX_FUNCTIONS:
                function = OTHER_FUNCTIONS
            function_row = rows.setdefault(function, [0] * _WIDTH)
        client_row = None if client is None else self.by_client.setdefault(client, [0] * _WIDTH)
        column = _COLUMN[after]
        self.total[column] += 1
        function_row[column] += 1
        if client_row is not None:
            client_row[column] += 1
        if before is not None:
            column = _COLUMN[before]
            self.total[column] -= 1
            function_row[column] -= 1
            if client_row is not None:
                client_row[column] -= 1

    def not_found(self, client: ClientID) -> None:
        """A client cancelled a task the scheduler does not know."""
        self.total[_NOT_FOUND] += 1
        self.by_client.setdefault(client, [0] * _WIDTH)[_NOT_FOUND] += 1

    def forget_client(self, client: ClientID) -> None:
        self.by_client.pop(client, None)

    def count(self, status: TaskStatus) -> int:
        return self.total[_COLUMN[status]]

    def totals(self) -> TaskCounts:
        return TaskCounts(*self.total)

    def of_client(self, client: ClientID) -> TaskCounts:
        row = self.by_client.get(client)
        return TaskCounts() if row is None else TaskCounts(*row)

    def functions(self) -> tuple[FunctionEntry, ...]:
        return tuple(FunctionEntry(name, TaskCounts(*row)) for name, row in self.by_function.items())
