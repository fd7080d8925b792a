"""parfun's own tests of its Scaler backend, from its release and unchanged, against scaler.

parfun (`opengris-parfun`, the reference family's library of parallel functions; the test extra installs it with its
own dependencies, not `opengris-scaler`) imports in its Scaler backend `Client`, `SchedulerClusterCombo`,
`ScalerFuture`, `ObjectReference` and the reference's `scaler.worker.agent.processor.processor.Processor`, and gets
ours. Its wheel leaves its tests out: its source distribution is downloaded once (into `.conformance-suites/` next to
the repository, which git ignores) and only its `tests/` folder is kept, so that the tests import the installed parfun.
The download asks the package index's simple API for the file and checks its sha256, as pip does; `pip download`
would also build the distribution's metadata in an isolated environment of its build requirements (setuptools, mypy,
black, flake8...), about 40 s of a clean clone's run. It is the fallback where that API does not answer.
They run in a pytest of their own (their package is named `tests`, as ours is), configured by nothing of ours: every
test of `tests/backend/test_scaler.py` (each starts a cluster of four workers holding one task each, issue 73's setting)
and the decorators' Scaler test, less the exclusions (exclusions.py, suite "parfun"). Their outcomes come back in a
JUnit report; the test here passes when every one of them passed.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance import exclusions
from tests.conformance.summary import SuiteCounts, cpu_seconds, record

#: its tests in one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("conformance_parfun"), pytest.mark.timeout(2400)]

REPOSITORY = Path(__file__).resolve().parents[2]
DISTRIBUTION = "opengris-parfun"
#: parfun's tests of its Scaler backend, as pytest names them from the source distribution's root, by their names here
SELECTED = {
    "TestScalerBackend.*": "tests/backend/test_scaler.py",
    "TestDecorators.test_parallel_nested_calls": "tests/test_decorators.py::TestDecorators::test_parallel_nested_calls",
}
#: how long fetching the source distribution may take (pip, the fallback, prepares its metadata in an isolated build
#: environment)
FETCH_TIMEOUT_SECONDS = 600.0
#: parfun imports numpy (OpenBLAS starts its thread pool) and pandas (pyarrow's jemalloc its background thread): with
#: those threads, each of its tests' `SchedulerClusterCombo` starts its host as a fresh interpreter that imports the
#: runtime (scaler.cluster.host), where a single-threaded process forks it. The suite is about parfun's use of our
#: API, not about which way the host starts (the other tests' processes, which have threads, start it fresh): with
#: these settings its process has one thread, and its run takes half the time (152 s to 76 s, quiet machine).
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
#: the simple API's JSON form (PEP 691)
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
#: the suite's bound: nine of its tests start a cluster each, one computes 80 s of sleeps on it
RUN_TIMEOUT_SECONDS = 1800.0


def suite_folder() -> Path:
    """The installed parfun's release's `tests/` folder (fetched once per version), with a pytest.ini of its own."""
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{DISTRIBUTION} is not installed (the test extra installs it: pip install -e '.[test]')")
    folder = REPOSITORY / ".conformance-suites" / f"{DISTRIBUTION}-{version}"
    folder.parent.mkdir(exist_ok=True)
    with open(folder.parent / f"{DISTRIBUTION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "tests").is_dir():
            _fetch_tests(version, folder)
    return folder


def _fetch_tests(version: str, folder: Path) -> None:
    with tempfile.TemporaryDirectory() as download:
        problem = _download_source(version, Path(download))
        archives = list(Path(download).glob("*.tar.gz"))
        if problem is not None or not archives:
            pytest.skip(f"could not download {DISTRIBUTION} {version}'s source distribution: {problem}")
        staging = Path(download) / "unpacked"
        with tarfile.open(archives[0]) as archive:
            root = archive.getnames()[0].split("/")[0]
            members = [member for member in archive.getmembers() if member.name.startswith(f"{root}/tests/")]
            archive.extractall(staging, members=members, filter="data")
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        (staging / root / "tests").rename(folder / "tests")
        (folder / "pytest.ini").write_text("[pytest]\n")  # so that pytest reads no configuration of ours above it


def _download_source(version: str, into: Path) -> str | None:
    """The release's source distribution into `into`, from the index's simple API (PEP 691), else by `pip download`;
    what went wrong, or None."""
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/").rstrip("/")
    wanted = f"{DISTRIBUTION.replace('-', '_')}-{version}.tar.gz"
    try:
        page = f"{index}/{DISTRIBUTION}/"
        with urllib.request.urlopen(urllib.request.Request(page, headers={"Accept": SIMPLE_JSON}),
                                    timeout=FETCH_TIMEOUT_SECONDS) as answer:  # fmt: skip
            (listed,) = [file for file in json.load(answer)["files"] if file["filename"] == wanted]
        with urllib.request.urlopen(urllib.parse.urljoin(page, listed["url"]), timeout=FETCH_TIMEOUT_SECONDS) as answer:
            data = answer.read()
        if hashlib.sha256(data).hexdigest() == listed["hashes"]["sha256"]:
            (into / wanted).write_bytes(data)
            return None
    except (OSError, ValueError, KeyError):
        pass  # no such API or file there: pip knows the configured index
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", DISTRIBUTION,
         "--dest", str(into), f"{DISTRIBUTION}=={version}"],
        capture_output=True, text=True, timeout=FETCH_TIMEOUT_SECONDS,
    )  # fmt: skip
    return None if fetched.returncode == 0 else fetched.stderr[-500:]


def _outcomes(report: Path) -> dict[str, str]:
    """Each test's outcome in a JUnit report ("passed", "failed: ...", "skipped: ...")."""
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}"
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        if problem is None:
            outcomes[name] = "passed"
        else:
            outcomes[name] = f"{problem.tag}: {problem.get('message', '')}\n{(problem.text or '')[-3000:]}"
    return outcomes


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], float, float]]:
    folder = suite_folder()
    wall, cpu = time.monotonic(), cpu_seconds()
    report = tmp_path_factory.mktemp("parfun") / "report.xml"
    selected = [path for name, path in SELECTED.items() if exclusions.reason_for("parfun", name) is None]
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    environment.update(SINGLE_THREADED)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *selected],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, env=environment, cwd=folder,
    )  # fmt: skip
    said = f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert report.exists(), f"parfun's suite did not run ({run.returncode}):\n{said}"
    yield _outcomes(report), time.monotonic() - wall, cpu_seconds() - cpu


def test_parfuns_own_scaler_backend_tests_pass(
    request: pytest.FixtureRequest, outcomes: tuple[dict[str, str], float, float]
) -> None:
    results, wall, cpu = outcomes
    failures = [f"{name}: {outcome}" for name, outcome in sorted(results.items()) if outcome != "passed"]
    excluded = [exclusion.test for exclusion in exclusions.of_suite("parfun")]
    counts = SuiteCounts(passed=len(results) - len(failures), excluded=len(excluded), failed=len(failures))
    record(request.node, "parfun", counts, wall, cpu)
    assert len(results) >= 9, f"parfun's Scaler tests did not all run: {sorted(results)}"  # test_scaler.py has 9
    assert not failures, f"{len(failures)} of parfun's Scaler tests did not pass:\n\n" + "\n\n".join(failures)
