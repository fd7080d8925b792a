"""CPython's own executor tests (`test.test_concurrent_futures`: the executor, shutdown, wait and as_completed mixins)
against `client.executor()`, unchanged, on one local cluster.

They run in an interpreter that ships them (`Lib/test/test_concurrent_futures/`, a package since Python 3.13; some
builds, such as Debian's or a trimmed pyenv one, leave `test` out): the newest found among this environment's own
Python, pyenv's and `python3.X` on the PATH. It gets an environment of its own next to the repository's
(`.venv-3.X-conformance`, made with uv and scaler installed editable, so its workers run this checkout), in which a
`.pth` line makes `from concurrent.futures import ScalerExecutor` give our executor
(`stdlib/scaler_conformance_executor.py`): CPython's tests of interpreter exit start fresh interpreters that import
the executor under test from there. `stdlib/run_stdlib_tests.py` runs the suite and reports each test's outcome;
each test here checks one mixin: every test of it passed, except those listed in exclusions.py.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance import exclusions
from tests.conformance.summary import SuiteCounts, cpu_seconds, record

#: one cluster for the module, its tests in one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("conformance_stdlib"), pytest.mark.timeout(900)]

REPOSITORY = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "stdlib"
MIXINS = ("ExecutorTest", "ExecutorShutdownTest", "WaitTests", "AsCompletedTests")
#: the whole suite's bound (it takes well under a minute on a quiet machine)
RUN_TIMEOUT_SECONDS = 600.0
#: how long making the environment may take (downloads on a clean machine)
ENVIRONMENT_TIMEOUT_SECONDS = 300.0


def _stdlib_of(interpreter: str) -> tuple[tuple[int, int], Path] | None:
    try:
        answer = subprocess.run(
            [interpreter, "-I", "-c", "import sys, sysconfig; print(sys.version_info[0], sys.version_info[1]); "
             "print(sysconfig.get_path('stdlib'))"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if answer.returncode != 0:
        return None
    version, stdlib = answer.stdout.splitlines()[:2]
    major, minor = (int(part) for part in version.split())
    return (major, minor), Path(stdlib)


def find_interpreter() -> tuple[str, tuple[int, int]] | None:
    """The newest Python (3.10 or later) that ships `test/test_concurrent_futures/` as a package."""
    candidates = [getattr(sys, "_base_executable", sys.executable)]
    candidates += sorted(str(path) for path in Path.home().glob(".pyenv/versions/3.*/bin/python"))
    candidates += [found for minor in range(10, 20) if (found := shutil.which(f"python3.{minor}"))]
    best: tuple[str, tuple[int, int]] | None = None
    for candidate in dict.fromkeys(candidates):
        described = _stdlib_of(candidate)
        if described is None:
            continue
        version, stdlib = described
        if version >= (3, 10) and (stdlib / "test" / "test_concurrent_futures" / "__init__.py").is_file():
            if best is None or version > best[1]:
                best = (candidate, version)
    return best


def environment_for(interpreter: str, version: tuple[int, int]) -> Path:
    """The conformance environment of that interpreter (made once, again when pyproject.toml or the interpreter
    changes): scaler editable, and the `.pth` line that installs the executor adapter."""
    folder = REPOSITORY / f".venv-{version[0]}.{version[1]}-conformance"
    python = folder / "bin" / "python"
    stamp = folder / "conformance-stamp"
    wanted = hashlib.sha256(f"{interpreter}\n".encode() + (REPOSITORY / "pyproject.toml").read_bytes()).hexdigest()
    lock_path = REPOSITORY / f".venv-{version[0]}.{version[1]}-conformance.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (python.exists() and stamp.exists() and stamp.read_text() == wanted):
            uv = Path(sys.executable).with_name("uv")
            if not uv.exists():
                pytest.skip("uv (the test extra) is needed to make the conformance environment")
            shutil.rmtree(folder, ignore_errors=True)
            for command in (
                [str(uv), "venv", "--quiet", "--python", interpreter, str(folder)],
                [str(uv), "pip", "install", "--quiet", "--python", str(python), "-e", str(REPOSITORY)],
            ):
                subprocess.run(command, check=True, timeout=ENVIRONMENT_TIMEOUT_SECONDS, capture_output=True)
            stamp.write_text(wanted)
        site_packages = Path(
            subprocess.run(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                check=True, capture_output=True, text=True, timeout=30,
            ).stdout.strip()
        )  # fmt: skip
        (site_packages / "scaler_conformance.pth").write_text(
            f"{HERE}\nimport scaler_conformance_executor; scaler_conformance_executor.install()\n"
        )
    return python


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, str]]]:
    found = find_interpreter()
    if found is None:
        pytest.skip("no Python 3.10+ here ships test/test_concurrent_futures/ (pyenv's 3.13 does)")
    interpreter, version = found
    wall, cpu = time.monotonic(), cpu_seconds()
    python = environment_for(interpreter, version)
    folder = tmp_path_factory.mktemp("stdlib")
    excluded = {exclusion.test: exclusion.reason for exclusion in exclusions.of_suite("stdlib")}
    (folder / "excluded.json").write_text(json.dumps(excluded))
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    environment["PYTHONPATH"] = str(HERE)
    run = subprocess.run(
        [str(python), str(HERE / "run_stdlib_tests.py"), str(folder / "outcomes.json"), str(folder / "excluded.json")],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, env=environment, cwd=folder,
    )  # fmt: skip
    assert run.returncode == 0, f"the runner failed ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    results: dict[str, dict[str, str]] = json.loads((folder / "outcomes.json").read_text())
    results["_cost"] = {"wall": f"{time.monotonic() - wall:.1f}", "cpu": f"{cpu_seconds() - cpu:.1f}",
                        "python": ".".join(map(str, version))}  # fmt: skip
    yield results


def _counts(results: dict[str, dict[str, str]], mixin: str) -> tuple[SuiteCounts, list[str]]:
    counts = SuiteCounts()
    failures = []
    for name, outcome in sorted(results.items()):
        if not name.startswith(f"{mixin}."):
            continue
        if outcome["outcome"] == "passed":
            counts.passed += 1
        elif outcome["outcome"] == "skipped" and outcome["detail"].startswith("excluded: "):
            counts.excluded += 1
        else:
            counts.failed += 1
            failures.append(f"{name}: {outcome['outcome']}: {outcome['detail'][-1500:]}")
    return counts, failures


@pytest.mark.parametrize("mixin", MIXINS)
def test_cpython_executor_mixin_passes(request: pytest.FixtureRequest, outcomes: dict[str, Any], mixin: str) -> None:
    """Every test of the mixin passed with our executor, except the listed exclusions."""
    counts, failures = _counts(outcomes, mixin)
    cost = outcomes["_cost"]
    record(request.node, "stdlib", counts, float(cost["wall"]) if mixin == MIXINS[0] else 0.0,
           float(cost["cpu"]) if mixin == MIXINS[0] else 0.0)  # fmt: skip
    assert counts.passed + counts.excluded + counts.failed > 0, f"no test of {mixin} ran"
    assert not failures, f"{len(failures)} of CPython's {mixin} tests failed:\n\n" + "\n\n".join(failures)


def test_every_stdlib_exclusion_names_a_test(outcomes: dict[str, Any]) -> None:
    names = [name for name in outcomes if name != "_cost"]
    stale = [exclusion.test for exclusion in exclusions.of_suite("stdlib") if exclusion.test not in names]
    assert not stale, f"exclusions naming no test of CPython's suite: {stale}"
