"""The fake cloud's image catalogue and version parsing (pure): which references it can pull, what ECS says of
the others, what a launch's PYTHON_VERSION means."""

from __future__ import annotations

import sys

import pytest

from scaler_rehearsal.fake_cloud.images import (
    BATCH_JOB_REPOSITORY,
    Image,
    ImageCatalogue,
    parse_image_option,
    pull_error,
    repository_of,
    this_python,
)
from scaler_rehearsal.fake_cloud.pythons import major_minor


@pytest.mark.parametrize(
    ("reference", "repository"),
    [
        ("scaler-worker", "scaler-worker"),
        ("scaler-worker:1.2", "scaler-worker"),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/scaler-worker:latest", "scaler-worker"),
        ("localhost:5000/team/scaler-batch-job@sha256:abc", "scaler-batch-job"),
    ],
)
def test_an_image_is_found_by_its_repository_whatever_the_registry_and_tag(reference: str, repository: str) -> None:
    assert repository_of(reference) == repository
    assert ImageCatalogue().find(reference) is not None


def test_other_images_cannot_be_pulled_and_ecs_says_so() -> None:
    assert ImageCatalogue().find("public.ecr.aws/v4u8j8r6/scaler:latest") is None
    assert pull_error("nope") == (
        "CannotPullContainerError: pull image manifest has been retried 5 time(s): failed to resolve ref "
        "docker.io/library/nope:latest: docker.io/library/nope:latest: not found"
    )
    assert "ref 123.dkr.ecr.us-east-1.amazonaws.com/x:1: " in pull_error("123.dkr.ecr.us-east-1.amazonaws.com/x:1")
    assert "ref docker.io/team/x:latest: " in pull_error("team/x")


def test_the_batch_job_image_has_this_build_baked_in_and_the_clouds_python_as_its_default() -> None:
    """As docker/batch-job.Dockerfile is built (DEFAULT_PYTHON: the clients'), so that a job of the clients' Python
    runs in the image's environment. Checked off: the worker image's default (3.13) instead, a 3.11 client's jobs
    made a fresh environment each."""
    image = ImageCatalogue(batch_job_requirements=lambda: "scaler-compute[aws]").find("scaler-batch-job:latest")
    assert image == Image(BATCH_JOB_REPOSITORY, this_python(), "scaler-compute[aws]")
    assert this_python() == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_the_image_option_names_a_repository_its_python_and_baked_requirements() -> None:
    assert parse_image_option("my-workers") == Image("my-workers")
    image = parse_image_option("jobs=3.11:scaler @ file:///tmp/scaler-1-py3-none-any.whl")
    assert image == Image("jobs", "3.11", "scaler @ file:///tmp/scaler-1-py3-none-any.whl")
    assert ImageCatalogue([image]).find("jobs:7") == image
    for bad in ("reg.io/jobs", "jobs:1", "jobs=three"):
        with pytest.raises(ValueError, match="--image"):
            parse_image_option(bad)


@pytest.mark.parametrize(("version", "minor"), [("3.12", "3.12"), ("3.12.11", "3.12"), (" 3.9 ", "3.9"),
                                                ("3", None), ("3.12.1.1", None), ("latest", None)])  # fmt: skip
def test_a_launchs_python_version_is_a_major_minor_with_an_optional_patch(version: str, minor: str | None) -> None:
    assert major_minor(version) == minor
