"""#38 finding 4: an AWS worker manager started without the `aws` extra says so in one line naming the extra, with
exit code 2, before anything starts (docs/guide/troubleshooting.md, "The commands"): `scaler FILE`,
`scaler_worker_manager TYPE` and `provision`. Each runs in a fresh interpreter where boto3 and packaging cannot be
imported, as in an environment made by `pip install scaler-compute`.

Checked by switching the mechanism off: with `missing_extra` returning None, `scaler_worker_manager` ends in a
ModuleNotFoundError traceback (exit 1), and `scaler FILE` starts object storage and the scheduler before its manager
dies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scaler.config.example_files import example_text
from scaler.config.manager_types import MANAGER_TYPES, ManagerType, missing_extra

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WITHOUT_AWS = """
import sys

sys.modules["boto3"] = None  # `import boto3` raises ImportError; find_spec says it is not there
sys.modules["packaging"] = None
from {module} import main

sys.exit(main(sys.argv[1:]))
"""


def run_without_aws(module: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_AWS.format(module=module), *argv],
        capture_output=True, text=True, timeout=90, cwd=cwd, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_missing_extra_names_the_extra_and_what_is_missing() -> None:
    row = ManagerType("demo", MANAGER_TYPES["aws_hpc"].section, "x:y", "DEM", "demo", extra="aws",
                      extra_modules=("json", "scaler_no_such_module_38"))  # fmt: skip
    assert missing_extra(row) == (
        "the demo worker manager needs the aws extra (scaler_no_such_module_38 not installed): "
        "pip install 'scaler-compute[aws]'"
    )
    assert missing_extra(MANAGER_TYPES["baremetal_native"]) is None


@pytest.mark.parametrize("name", ["aws_batch", "aws_ecs", "aws_ec2"])
def test_the_launcher_refuses_an_aws_file_in_one_line(name: str, tmp_path: Path) -> None:
    (tmp_path / "stack.toml").write_text(example_text(name))
    done = run_without_aws("scaler.entry_points.launcher", "stack.toml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "needs the aws extra (boto3, packaging not installed): pip install 'scaler-compute[aws]'" in lines[0]
    assert "Traceback" not in done.stderr and done.stdout == "", "nothing started"


def test_the_manager_command_and_provision_refuse_in_one_line(tmp_path: Path) -> None:
    done = run_without_aws(
        "scaler.entry_points.worker_manager", "aws_hpc", "tcp://127.0.0.1:1", "-q", "q", "-d", "d", "--s3-bucket",
        "b", cwd=tmp_path,
    )  # fmt: skip
    output = done.stdout + done.stderr  # the manager logs to stdout
    assert done.returncode == 2, output
    assert output.count("\n") == 1 and "Traceback" not in output, output
    assert "the aws_hpc worker manager needs the aws extra" in output
    (tmp_path / "batch.toml").write_text(example_text("aws_batch"))
    done = run_without_aws("scaler.worker_manager.aws_hpc.provision", "batch.toml", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [
        "provision: the aws_hpc worker manager needs the aws extra (boto3, packaging not installed): "
        "pip install 'scaler-compute[aws]'"
    ]
