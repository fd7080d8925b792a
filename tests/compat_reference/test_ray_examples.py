"""The Ray documentation examples the reference ships (examples/ray_compat/, copied unchanged into ray_examples/)
run against our scaler.compat.ray, each as a script in a fresh interpreter.

Each script starts with `import ray`; without Ray installed, a one-line preamble imports `scaler.compat.ray` first
(as conftest.py does for the tests), then the script runs as `__main__` unchanged. Three cannot run here, and say
why when skipped: batch_prediction.py reads parquet files from a public S3 bucket and web_crawler.py fetches
docs.ray.io (this machine has no network beyond package registries); plot_hyperparameter.py needs torch and
downloads MNIST (the reference skips it too, examples/ray_compat/skip_tests.txt).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

EXAMPLES = Path(__file__).parent / "ray_examples"
PREAMBLE = "import runpy, sys, scaler.compat.ray; runpy.run_path(sys.argv[1], run_name='__main__')"
NEEDS_NETWORK = {
    "batch_prediction.py": "reads parquet files from a public S3 bucket (no network here)",
    "web_crawler.py": "fetches pages of docs.ray.io (no network here)",
    "plot_hyperparameter.py": "needs torch and downloads MNIST; skipped by the reference too",
}


def run_example(name: str) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run(
        [sys.executable, "-c", PREAMBLE, str(EXAMPLES / name)], capture_output=True, text=True, timeout=280,
        cwd=EXAMPLES, env=environment, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize("name", sorted(path.name for path in EXAMPLES.glob("*.py")))
def test_a_reference_ray_example_runs(name: str) -> None:
    if name in NEEDS_NETWORK:
        pytest.skip(NEEDS_NETWORK[name])
    done = run_example(name)
    assert done.returncode == 0, f"{name} failed:\n{done.stderr[-3000:]}"


def test_map_reduce_counts_the_words_of_the_zen_of_python() -> None:
    """The example's reducers' counts, printed last, are those of the Zen of Python."""
    import this  # prints the Zen once, here in the test process; its text is in this.s

    zen = "".join(this.d.get(c, c) for c in this.s)
    expected: dict[str, int] = {}
    for word in zen.lower().split():
        expected[word] = expected.get(word, 0) + 1
    done = run_example("map_reduce.py")
    assert done.returncode == 0, done.stderr[-3000:]
    counts = dict(line.rsplit(": ", 1) for line in done.stdout.splitlines() if not line.startswith("Mapper"))
    partitioned = len(zen.split()) // 3 * 3  # the example drops the words past three equal partitions
    assert sum(int(count) for count in counts.values()) == partitioned
    assert counts["the"] == str(expected["the"])
