"""What each worker of the local cluster `ray.init` starts offers, so that together they offer the node Ray's
`ray.init(num_cpus=..., num_gpus=..., resources=...)` describes (issue 77, item 10)."""

from __future__ import annotations

from scaler.compat.ray_session import node_capabilities, spread


def test_a_resource_is_spread_over_the_workers_in_whole_units() -> None:
    assert spread(1, 2) == [1, 0]
    assert spread(3, 2) == [2, 1]
    assert spread(4, 2) == [2, 2]
    assert spread(0.5, 3) == [1, 0, 0]  # a fraction of a GPU is one GPU's worth of a worker


def test_the_workers_together_offer_the_node() -> None:
    assert node_capabilities(2, 1, None) == [{"gpu": 1}, {}]
    assert node_capabilities(2, 3, {"special": 1, "none": 0}) == [{"special": 1, "gpu": 2}, {"gpu": 1}]
    assert node_capabilities(4, None, None) is None
    assert node_capabilities(1, None, {}) is None
