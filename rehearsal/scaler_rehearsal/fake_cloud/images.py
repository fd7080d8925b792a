"""The container images the fake cloud can "pull": a small catalogue, as a registry would have them.

Every image here is the project's worker image (`docker/worker.Dockerfile`): its entrypoint
(`image/worker-entrypoint.sh`) runs a launch of the image's default Python that lists no `PYTHON_REQUIREMENTS` in
the image's own environment (the default Python with the baked requirements, made at build time:
`image_environments.py`), and any other launch in a fresh virtual environment of `PYTHON_VERSION` with the baked
requirements and `PYTHON_REQUIREMENTS` installed; then it runs the container's command (a Batch job definition's)
or `sh -c "$COMMAND"` (an ECS task's override). An image may have requirements baked in (`docker build --build-arg
BAKED_REQUIREMENTS=...`) and has a default Python. An image is found by its repository's last path
component, whatever the registry and tag (`scaler-worker:1.2`, `123456789012.dkr.ecr.us-east-1.amazonaws.com/
scaler-worker:latest`); anything else cannot be pulled, and the task stops with ECS's own words.

`scaler-batch-job` is the image docker/batch-job.Dockerfile builds for AWS Batch: the worker image with this build of
scaler and the `aws` extra baked in (a Batch job runs one task and installs nothing), built with the clients' Python as
its default. The fake cloud makes it the same way, from the scaler that runs it (`wheels.wheel_of(this_build())`: a
wheel of this install, whatever it came from) and with its Python, when a job first needs it;
`--image scaler-batch-job=...` names another.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scaler_rehearsal import images as image_references
from scaler_rehearsal.fake_cloud.pythons import major_minor
from scaler_rehearsal.images import qualified

#: The Pythons docker/worker.Dockerfile installs (`uv python install`); the image's default is its last.
WORKER_IMAGE_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
logger = logging.getLogger(__name__)

#: The worker image's repository: scaler and the tasks' packages come with each launch.
WORKER_REPOSITORY = "scaler-worker"
#: The Batch jobs' image: the worker image with this build of scaler (and boto3) baked in.
BATCH_JOB_REPOSITORY = "scaler-batch-job"
#: The repositories the fake cloud knows without being told.
DEFAULT_REPOSITORIES = (WORKER_REPOSITORY, BATCH_JOB_REPOSITORY)


@dataclass(frozen=True)
class Image:
    """One image of the catalogue: the project's worker image under `repository`, with `baked_requirements`
    (`;` or newline separated) installed in every container and `default_python` when a launch names none."""

    repository: str
    default_python: str = WORKER_IMAGE_PYTHONS[-1]
    baked_requirements: str = ""

    def environment(self) -> dict[str, str]:
        """What the image's own ENV lines set (docker/worker.Dockerfile)."""
        return {"SCALER_IMAGE_PYTHON": self.default_python, "SCALER_IMAGE_REQUIREMENTS": self.baked_requirements}


def this_python() -> str:
    """The major.minor of the Python running the fake cloud: the clients', whose jobs `scaler-batch-job` runs."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def this_build_requirement() -> str:
    """`scaler-compute[aws] @ file:///.../scaler_compute-X-py3-none-any.whl`: this scaler, as a wheel made from
    its install (cached), with the extra a Batch job needs. Raises LookupError or WheelError naming why not."""
    from scaler.worker_manager.ship.distributions import DISTRIBUTION_NAME, this_build
    from scaler.worker_manager.ship.wheels import wheel_of

    return f"{DISTRIBUTION_NAME}[aws] @ {wheel_of(this_build()).path.as_uri()}"


class ImageCatalogue:
    """The images the fake cloud can pull. `batch_job_requirements` makes what `scaler-batch-job` has baked in (this
    build by default), asked once, when a launch first names that image and the catalogue was given no other."""

    def __init__(
        self, images: Iterable[Image] = (), batch_job_requirements: Callable[[], str] = this_build_requirement
    ) -> None:
        given = {image.repository: image for image in images}
        self._images = {WORKER_REPOSITORY: Image(WORKER_REPOSITORY), **given}
        self._batch_job_requirements = batch_job_requirements if BATCH_JOB_REPOSITORY not in given else None
        self._lock = threading.Lock()

    def find(self, reference: str) -> Image | None:
        repository = repository_of(reference)
        if repository == BATCH_JOB_REPOSITORY:
            with self._lock:
                if repository not in self._images:
                    self._images[repository] = self._baked_batch_image()
        return self._images.get(repository)

    def _baked_batch_image(self) -> Image:
        assert self._batch_job_requirements is not None
        try:
            requirements = self._batch_job_requirements()
        except (LookupError, ValueError, OSError) as error:
            logger.warning(
                "the %s image has no scaler baked in: %s; its jobs fail with \"No module named 'scaler'\" (name "
                "an image that has it: --image %s=PYTHON:REQUIREMENTS)", BATCH_JOB_REPOSITORY, error,
                BATCH_JOB_REPOSITORY,
            )  # fmt: skip
            return Image(BATCH_JOB_REPOSITORY)
        logger.info("the %s image has this build of scaler baked in: %s", BATCH_JOB_REPOSITORY, requirements)
        return Image(BATCH_JOB_REPOSITORY, this_python(), requirements)

    def names(self) -> list[str]:
        return sorted({*self._images, BATCH_JOB_REPOSITORY})


def repository_of(reference: str) -> str:
    """`123.dkr.ecr.us-east-1.amazonaws.com/team/scaler-worker:1@sha256:..` -> `scaler-worker` (spaces around it
    ignored, as ECS does)."""
    return image_references.repository_of(reference.strip())


def pull_error(reference: str) -> str:
    """What ECS says of a task whose image does not exist (its `stoppedReason`, the container's `reason`)."""
    ref = qualified(reference.strip() or "<no image>")
    return (
        "CannotPullContainerError: pull image manifest has been retried 5 time(s): "
        f"failed to resolve ref {ref}: {ref}: not found"
    )


def parse_image_option(text: str) -> Image:
    """`--image REPOSITORY[=PYTHON[:REQUIREMENTS]]`: another name of the worker image, with its default Python and
    requirements baked in (e.g. `scaler-batch-job=3.12:scaler[aws] @ file:///tmp/scaler-0.1-py3-none-any.whl`)."""
    repository, separator, rest = text.partition("=")
    repository = repository.strip()
    if not repository or "/" in repository or ":" in repository:
        raise ValueError(f"--image {text!r}: expected a repository name (no registry or tag), e.g. scaler-worker")
    if not separator:
        return Image(repository)
    python, _colon, requirements = rest.partition(":")
    if major_minor(python) is None:
        raise ValueError(f"--image {text!r}: {python!r} is not a Python version (major.minor, e.g. 3.12)")
    return Image(repository, python.strip(), requirements.strip())
