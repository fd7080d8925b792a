"""An offloading manager (aws_hpc, symphony) runs each task in the remote system's own process: the processor
settings it cannot apply (preload, preimport) are named in a warning at its start, not silently dropped."""

from __future__ import annotations

import dataclasses

from scaler.config.manager_types import MANAGER_TYPES
from scaler.config.sections import (
    AWSHPCWorkerManagerConfig,
    NativeWorkerManagerConfig,
    SymphonyWorkerManagerConfig,
)
from scaler.worker_manager.offload.proxy_units import unapplied_settings

BATCH = AWSHPCWorkerManagerConfig(
    scheduler_address="tcp://127.0.0.1:1", job_queue="q", job_definition="d", s3_bucket="tasks"
)


def test_batch_names_preimport_and_preload_and_what_to_do_instead() -> None:
    config = dataclasses.replace(BATCH, preimport=("numpy",), preload="mymodule:setup")
    said = unapplied_settings(config, MANAGER_TYPES["aws_hpc"])
    assert said is not None
    assert "--preload and --preimport do not apply to the aws_hpc worker manager and are ignored" in said
    assert "AWS Batch" in said and "in the task's function" in said


def test_symphony_names_the_one_setting_given() -> None:
    config = SymphonyWorkerManagerConfig(scheduler_address="tcp://127.0.0.1:1", service_name="s", preimport=("x",))
    said = unapplied_settings(config, MANAGER_TYPES["symphony"])
    assert said is not None and said.startswith("--preimport does not apply to the symphony worker manager")
    assert "IBM Symphony" in said


def test_nothing_is_said_without_them_or_for_a_manager_of_workers() -> None:
    assert unapplied_settings(BATCH, MANAGER_TYPES["aws_hpc"]) is None
    native = NativeWorkerManagerConfig(scheduler_address="tcp://127.0.0.1:1", preimport=("numpy",))
    assert unapplied_settings(native, MANAGER_TYPES["baremetal_native"]) is None
