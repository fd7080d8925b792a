"""The suite's test processes (tests/conftest.py): what collection made is kept out of the collector's walks."""

from __future__ import annotations

import gc

import pytest


@pytest.mark.timeout(60)
def test_the_objects_collection_made_are_frozen_and_a_test_makes_new_ones_unfrozen() -> None:
    """This module's own objects were made at collection: frozen, so that a full collection walks only what the tests
    made since. Fails with `pytest_collection_finish` not freezing (nothing frozen)."""
    assert gc.get_freeze_count() > 0
    made_now = [object()]
    assert any(found is made_now for found in gc.get_objects(generation=0))
