"""A joblib batch is known by its function: the task the scaler backend submits for a batch carries the name of the
batch's function (what the monitor's statistics and the scheduler's learned run times go by), and runs its calls."""

from __future__ import annotations

import functools

from joblib import delayed
from joblib._parallel_backends import SequentialBackend

from scaler.compat.joblib import batch_runner
from scaler.payload.serializer import DefaultSerializer
from scaler.payload.stored_objects import StoredOnce
from scaler.payload.task_encoder import TaskEncoder
from scaler.protocol.ids import ClientID


def fit(x: int, scale: int = 1) -> int:
    return x * scale


def score(x: int) -> int:
    return -x


def named(runner: object) -> str:
    """The name a task of this function is submitted under (the client's task encoder decides it)."""
    stored: dict[bytes, object] = {}
    objects = StoredOnce(lambda object_id, payload, name: stored.setdefault(object_id, payload))
    return TaskEncoder(ClientID(b"Client|joblib-names"), DefaultSerializer(), objects).function(runner).name


def test_a_batch_is_named_after_its_function_and_runs_its_calls() -> None:
    calls = [delayed(fit)(x, scale=3) for x in range(4)]
    runner = batch_runner(calls)
    assert named(runner) == "fit (joblib batch)"
    assert runner(calls, (SequentialBackend(), 1)) == [0, 3, 6, 9]


def test_batches_of_one_function_share_one_runner_and_a_mixed_batch_has_its_own_name() -> None:
    assert batch_runner([delayed(score)(1)]) is batch_runner([delayed(score)(2), delayed(score)(3)])
    assert named(batch_runner([delayed(functools.partial(fit, scale=2))(1)])) == "fit (joblib batch)"
    assert named(batch_runner([delayed(fit)(1), delayed(score)(1)])) == "joblib batch"
