"""The container images the fake cloud can "pull": a small catalogue, as a registry would have them.

Every image here is the project's worker image (`docker/worker.Dockerfile`): its entrypoint
(`image/worker-entrypoint.sh`) makes a fresh virtual environment with `PYTHON_VERSION`, installs
`PYTHON_REQUIREMENTS`, then runs the container's command (a Batch job definition's) or `sh -c "$COMMAND"` (an ECS
task's override). An image may have requirements baked in (`docker build --build-arg BAKED_REQUIREMENTS=...`),
installed in every container it starts, and a default Python. An image is found by its repository's last path
component, whatever the registry and tag (`scaler-worker:1.2`, `123456789012.dkr.ecr.us-east-1.amazonaws.com/
scaler-worker:latest`); anything else cannot be pulled, and the task stops with ECS's own words.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scaler.fake_cloud.pythons import major_minor

#: The Pythons docker/worker.Dockerfile installs (`uv python install`); the image's default is its last.
WORKER_IMAGE_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
#: The repositories the fake cloud knows without being told: the worker image and its Batch name.
DEFAULT_REPOSITORIES = ("scaler-worker", "scaler-batch-job")


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


class ImageCatalogue:
    def __init__(self, images: Iterable[Image] = ()) -> None:
        self._images = {image.repository: image for image in (*map(Image, DEFAULT_REPOSITORIES), *images)}

    def find(self, reference: str) -> Image | None:
        return self._images.get(repository_of(reference))

    def names(self) -> list[str]:
        return sorted(self._images)


def repository_of(reference: str) -> str:
    """`123.dkr.ecr.us-east-1.amazonaws.com/team/scaler-worker:1@sha256:..` -> `scaler-worker`."""
    name = reference.strip().split("@", 1)[0].rsplit("/", 1)[-1]
    return name.split(":", 1)[0]


def pull_error(reference: str) -> str:
    """What ECS says of a task whose image does not exist (its `stoppedReason`, the container's `reason`)."""
    ref = _qualified(reference)
    return (
        "CannotPullContainerError: pull image manifest has been retried 5 time(s): "
        f"failed to resolve ref {ref}: {ref}: not found"
    )


def _qualified(reference: str) -> str:
    """A reference as the container runtime resolves it: Docker Hub's `docker.io/library/` for a short name."""
    text = reference.strip() or "<no image>"
    if "@" not in text and ":" not in text.rsplit("/", 1)[-1]:
        text += ":latest"
    first = text.split("/", 1)[0]
    if "/" not in text:
        return f"docker.io/library/{text}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{text}"
    return text


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
