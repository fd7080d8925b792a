"""A user's typed code: what mypy must accept, and (the lines commented 'error') what it must refuse.

tests/unit/test_client_types.py runs mypy over this file; each line whose comment starts with 'error' must
be reported and no other line may be.
"""

from __future__ import annotations

from scaler import Client
from scaler.client.future import ScalerFuture


def add(x: int, y: int) -> int:
    return x + y


def shout(word: str) -> str:
    return word.upper()


def use(client: Client) -> None:
    future: ScalerFuture[int] = client.submit(add, 1, 2)
    total: int = future.result()
    also: int = client.submit(add, x=1, y=2).result()
    words: list[str] = client.map(shout, ["a", "b"])
    sums: list[int] = client.map(add, [1, 2], [3, 4])
    pairs: list[int] = client.starmap(add, [(1, 2), (3, 4)])
    print(total, also, words, sums, pairs)

    client.submit(add, "one", 2)  # error: the argument's type
    client.submit(add, 1)  # error: a missing argument
    client.submit(add, 1, 2, 3)  # error: one argument too many
    wrong: str = client.submit(add, 1, 2).result()  # error: the result's type
    bad_map: list[int] = client.map(shout, ["a"])  # error: the map's result type
    bad_items: list[str] = client.map(shout, [1, 2])  # error: the items' type
    print(wrong, bad_map, bad_items)

    # docs/guide/client_api.md: submit's own keywords are flagged for a function without such a parameter, and
    # submit_verbose is the spelling that type-checks
    client.submit(add, 1, 2, profiling=True)  # error: not a parameter of add
    client.submit(add, 1, 2, priority=5)  # error: not a parameter of add
    verbose: int = client.submit_verbose(add, (1, 2), {}, profiling=True, priority=5).result()
    print(verbose)
