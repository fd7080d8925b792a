"""Linear chains of a dict graph fused into one task each (scaler/client/graph_chains.py), at the encoder: which
chains fuse, what the fused task carries, and that a processor's decoder runs it to the unfused result.

The tests that count nodes fail with `graph_chains.FUSE_CHAINS = False` (checked by hand: every call is then a node
of its own), which `test_with_fusing_off_every_call_is_a_node` shows too."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

from scaler.client import graph_chains
from scaler.client.graph import encode_graph
from scaler.payload.chain_call import ChainCall, ChainStep
from scaler.payload.task_decoder import DecodedCall
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID
from tests.unit.test_payload import Sides

CLIENT = ClientID(b"Client|chains")


def make(index: int, rows: int) -> list[int]:
    return list(range(index * rows, (index + 1) * rows))


def total(values: list[int]) -> int:
    return sum(values)


def scaled(factor: int, value: int, offset: int) -> int:
    return factor * value + offset


def add(*values: int) -> int:
    return sum(values)


def encoded(sides: Sides, graph: dict[Hashable, Any], keys: list[Hashable]) -> m.GraphTask:
    result = encode_graph(
        graph, keys, sides.encoder, CLIENT, profiling=False, stream_output=False, priority=0, capabilities=()
    )
    assert result.message is not None
    return result.message


def names(graph: dict[Hashable, Any], keys: list[Hashable]) -> list[str]:
    return [node.function_name for node in encoded(Sides(), graph, keys).nodes]


def run(sides: Sides, task: m.Task, inputs: tuple[m.TaskInput, ...] = ()) -> Any:
    decoded = sides.decoder.decode(
        m.Task(task.task_id, task.client_id, task.body, task.function_name, graph_id=task.graph_id, inputs=inputs)
    )
    assert isinstance(decoded, DecodedCall), decoded
    return decoded.function(*decoded.args, **decoded.kwargs)


def test_the_dataframe_fan_out_shape_fuses_each_make_into_its_group() -> None:
    graph: dict[Hashable, Any] = {}
    for index in range(5):
        graph[f"made-{index}"] = (make, index, 3)
        graph[f"grouped-{index}"] = (total, f"made-{index}")
    graph["all"] = (add, *(f"grouped-{index}" for index in range(5)))
    assert names(graph, ["all"]) == ["make > total"] * 5 + ["add"]


def test_a_chain_of_four_is_one_node_whose_first_step_keeps_its_dependencies() -> None:
    graph = {
        "data": 2,
        "a": (add, 1, 2),
        "b": (add, 3, 4),
        "x1": (add, "a", "b"),  # two dependencies: the chain starts here
        "x2": (scaled, 10, "x1", "data"),
        "x3": (scaled, "x2", 1, 5),
        "x4": (add, "x3", "data"),
    }
    sides = Sides()
    message = encoded(sides, graph, ["x4"])
    assert [node.function_name for node in message.nodes] == ["add", "add", "add > scaled > scaled > add"]
    a, b, chain = message.nodes
    assert set(chain.dependencies) == {a.task_id, b.task_id}
    inputs = (
        m.TaskInput(a.task_id, m.PayloadKind.INLINE, sides.encoder.argument(3, "", 0).data),
        m.TaskInput(b.task_id, m.PayloadKind.INLINE, sides.encoder.argument(7, "", 0).data),
    )
    x1 = 3 + 7
    x2 = 10 * x1 + 2
    x3 = x2 * 1 + 5
    assert run(sides, chain, inputs) == x3 + 2


def test_a_long_chain_is_named_by_its_first_calls_its_last_and_its_length() -> None:
    """Every task and stored function carries the chain's name: 10,000 calls in a row (dask's own stack-limit test)
    are not named after each of them."""
    graph: dict[Hashable, Any] = {"x0": 0, **{f"x{i + 1}": (add, f"x{i}") for i in range(10_000)}}
    assert names(graph, ["x10000"]) == ["add > add > add > ... > add (10,000 calls)"]


@pytest.mark.parametrize(
    ("graph", "keys"),
    [
        ({"x": (make, 1, 2), "y": (total, "x")}, ["x", "y"]),  # x requested: its result goes to the client
        ({"x": (make, 1, 2), "y": (total, "x"), "z": (total, "x")}, ["y", "z"]),  # x has two dependents
        ({"x": (add, 1), "y": (add, "x", "x")}, ["y"]),  # y names x twice
        ({"x": (add, 1), "y": (total, ["x", 2])}, ["y"]),  # y names x inside a list
        ({"w": (add, 1), "x": (add, 2), "y": (add, "x", "w")}, ["y"]),  # y waits on w too: fusing would delay x
        # y's other argument is stored: fused, it would be read when x starts, and might be deleted until y's start
        ({"x": (add, 1), "y": (scaled, "x", b"b" * 100_000, b"")}, ["y"]),
    ],
)
def test_what_does_not_fuse(graph: dict[Hashable, Any], keys: list[Hashable]) -> None:
    assert len(names(graph, keys)) == len(graph)


def test_with_fusing_off_every_call_is_a_node(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = {"x": (make, 1, 2), "y": (total, "x")}
    assert names(graph, ["y"]) == ["make > total"]
    monkeypatch.setattr(graph_chains, "FUSE_CHAINS", False)
    assert names(graph, ["y"]) == ["make", "total"]


def test_a_fused_task_runs_to_the_unfused_result_and_a_step_error_is_that_steps() -> None:
    sides = Sides()
    (node,) = encoded(sides, {"x": (make, 2, 4), "y": (scaled, 3, "x", [1])}, ["y"]).nodes
    assert run(sides, node) == 3 * [8, 9, 10, 11] + [1]
    (failing,) = encoded(sides, {"x": (make, 2, "not a number"), "y": (total, "x")}, ["y"]).nodes
    with pytest.raises(TypeError, match="'str' object cannot be interpreted"):
        run(sides, failing)


def test_a_step_with_a_stored_argument_cuts_the_chain_and_starts_the_next() -> None:
    sides = Sides()
    big = b"b" * 100_000
    graph = {"x1": (add, 1, 2), "x2": (scaled, "x1", big, b""), "x3": (len, "x2")}
    first, rest = encoded(sides, graph, ["x3"]).nodes
    assert (first.function_name, rest.function_name) == ("add", "scaled > len")
    assert rest.dependencies == (first.task_id,)
    given = (m.TaskInput(first.task_id, m.PayloadKind.INLINE, sides.encoder.argument(3, "", 0).data),)
    assert run(sides, rest, given) == 3 * 100_000


def test_a_first_step_may_take_a_stored_argument() -> None:
    sides = Sides()
    big = b"a" * 100_000
    (node,) = encoded(sides, {"x": (len, big), "y": (add, "x", 1)}, ["y"]).nodes
    assert run(sides, node) == 100_001


def test_one_runner_per_chain_shape_so_the_client_serializes_it_once() -> None:
    steps = [ChainStep(make, 2, -1), ChainStep(total, 0, 0)]
    runner = graph_chains.chain_runner(steps)
    assert graph_chains.chain_runner(list(steps)) is runner
    assert graph_chains.chain_runner([ChainStep(make, 2, -1), ChainStep(sum, 0, 0)]) is not runner
    graph = {f"x{i}": (make, i, 2) for i in range(3)} | {f"y{i}": (total, f"x{i}") for i in range(3)}
    message = encoded(Sides(), graph, ["y0", "y1", "y2"])
    assert len({bytes(codec.decode_body(node.body).function_id) for node in message.nodes}) == 1


def test_a_chain_call_checks_its_steps() -> None:
    with pytest.raises(ValueError, match="not a chain"):
        ChainCall((ChainStep(make, 2, -1),))
    with pytest.raises(ValueError, match="not a chain"):
        ChainCall((ChainStep(make, 2, -1), ChainStep(total, 0, 1)))
    assert ChainCall((ChainStep(make, 2, -1), ChainStep(total, 0, 0)))(1, 2) == 2 + 3
