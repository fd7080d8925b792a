"""`scaler FILE` refuses, before anything starts, an `orb_aws_ec2` manager whose default AMI (Amazon Linux 2023)
cannot run this Python: otherwise the file's cloud hub, an instance of that AMI, is launched, boots, fails to install
the Python, and the stack gives up only then."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

pytest.importorskip("botocore", reason="boto3 comes with the aws extra (make test installs it)")

from scaler.config.example_files import example_text
from scaler.config.loader import ConfigError
from scaler.entry_points.launcher import _checked_file


def check(path: Path, down: bool = False) -> object:
    return _checked_file(argparse.Namespace(file=str(path), down=down))


def test_the_ec2_example_on_a_python_the_default_ami_lacks_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("scaler.worker_manager.orb_aws_ec2.manager.this_python", lambda: "3.10")
    path = tmp_path / "aws_ec2.toml"
    path.write_text(example_text("aws_ec2"))
    with pytest.raises(ConfigError, match=r"\[\[worker_manager\]\] 'ec2': the client runs Python 3\.10, which Amazon "
                                          r"Linux 2023 .* give image_id an AMI with python3\.10"):  # fmt: skip
        check(path)
    check(path, down=True)  # taking down what a stack left runs nothing: not refused
    path.write_text(example_text("aws_ec2").replace('instance_type = "t3.medium"',
                                                    'instance_type = "t3.medium"\nimage_id = "ami-0abc"'))  # fmt: skip
    check(path)  # an AMI of one's own may have the Python


def test_a_python_the_default_ami_has_is_not_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("scaler.worker_manager.orb_aws_ec2.manager.this_python", lambda: "3.12")
    path = tmp_path / "aws_ec2.toml"
    path.write_text(example_text("aws_ec2"))
    check(path)
