"""The example stack files that ship inside the package, and their short names (`scaler --example NAME`).

The files live in `scaler/config/examples/` as package data, so a `pip install` has them; the repository's
`config/` is a symbolic link to that folder, so `scaler config/local.toml` in a clone reads the same bytes.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from importlib import resources

from scaler.config.toml_file import ConfigError

#: The package folder of the example files (relative to this package).
EXAMPLES_FOLDER = "examples"


@dataclass(frozen=True)
class ExampleFile:
    #: what `scaler --example NAME` takes
    name: str
    #: the file in `scaler/config/examples/` (and so in the repository's `config/`)
    file_name: str
    #: one line for `scaler --example`
    summary: str

    @property
    def stem(self) -> str:
        return self.file_name.removesuffix(".toml")


EXAMPLES: tuple[ExampleFile, ...] = (
    ExampleFile("local", "local.toml", "object storage, a scheduler and local workers that follow the work (0 to 4)"),
    ExampleFile("fixed", "fixed_pool.toml", "a fixed pool of 4 local workers that never scales"),
    ExampleFile("tiers", "waterfall_tiers.toml", "two tiers of local workers under waterfall_v1: the second when "
                "the first is full"),
    ExampleFile("cost_tiers", "cost_tiers.toml", "two priced tiers under the cost policy: a cheap slow one, a dear "
                "fast one"),
    ExampleFile("web", "web.toml", "the local stack on ws:// addresses, for the client in a web page (Try it in your "
                "browser)"),
    ExampleFile("secure_local", "secure_local.toml", "the local stack with CURVE keys on every connection (make the "
                "keys first)"),
    ExampleFile("aws_ecs", "aws_ecs.toml", "workers in AWS ECS Fargate tasks (rehearse on scaler_fake_cloud)"),
    ExampleFile("aws_ec2", "aws_ec2.toml", "workers on AWS EC2 instances (rehearse on scaler_fake_cloud)"),
    ExampleFile("kubernetes", "kubernetes.toml", "workers as pods of a Kubernetes cluster (rehearse on "
                "scaler_fake_kubernetes)"),
    ExampleFile("kubernetes_cluster", "kubernetes_cluster.yaml", "manifests: the scheduler and the kubernetes "
                "manager in a cluster (kubectl apply -f)"),
    ExampleFile("aws_batch", "aws_batch.toml", "each task as an AWS Batch job (rehearse on scaler_fake_cloud)"),
    ExampleFile("symphony", "symphony.toml", "each task as an IBM Symphony task (needs Symphony's soamapi)"),
    ExampleFile("slurm", "slurm.toml", "workers as Slurm batch jobs, from a login node (name it in the file first)"),
)  # fmt: skip


def find_example(name: str) -> ExampleFile:
    """The example called `name` (its short name, or its file name with or without `.toml`); ConfigError
    naming the closest one and every name otherwise."""
    for example in EXAMPLES:
        if name in (example.name, example.stem, example.file_name):
            return example
    names = [example.name for example in EXAMPLES]
    close = difflib.get_close_matches(name, names + [example.stem for example in EXAMPLES], n=1)
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    raise ConfigError(f"no example called {name!r}{hint}; the examples: {', '.join(names)}")


def example_text(name: str) -> str:
    """The text of an example file, as it ships."""
    example = find_example(name)
    return (resources.files("scaler.config") / EXAMPLES_FOLDER / example.file_name).read_text(encoding="utf-8")


def shipped_file_names() -> list[str]:
    """Every `.toml` (stack) and `.yaml` (manifest) file in the package's example folder (a test checks that each one
    has a name)."""
    folder = resources.files("scaler.config") / EXAMPLES_FOLDER
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith((".toml", ".yaml")))


def example_listing(prog: str) -> str:
    """What `scaler --example` prints: every name with its file and one line."""
    name_width = max(len(example.name) for example in EXAMPLES)
    file_width = max(len(example.file_name) for example in EXAMPLES)
    lines = [f"Example stack files; `{prog} --example NAME` prints one, e.g.:", ""]
    lines += [f"    {prog} --example local > local.toml && {prog} local.toml", ""]
    lines += [
        f"  {example.name:<{name_width}}  {example.file_name:<{file_width}}  {example.summary}" for example in EXAMPLES
    ]
    return "\n".join(lines)
