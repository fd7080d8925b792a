"""The one list of the peers' tests that the conformance tier does not run, each with its reason.

A test is named as its suite names it: for CPython's executor tests "Mixin.test_name"; for joblib and Dask the test
function's name, or a pattern of its parametrized name where `*` stands for any text ("test_x[scaler-*]"; the
brackets are the parameters', nothing else). The tier skips each one with "excluded: <reason>" (so a run lists them);
for CPython's suite, an entry naming no test fails the tier (a stale exclusion).
docs/guide/migrating.md carries this list as a table (`markdown_table`); tests/conformance/test_exclusions.py checks
that the page's table is this list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The suites, in the order the page lists them, with how the page names them.
SUITES = {
    "stdlib": "CPython's `test.test_concurrent_futures`",
    "joblib": "joblib's `test_parallel.py`",
    "dask": "Dask's `GetFunctionTestMixin`",
    "parfun": "parfun's Scaler tests",
}


#: Why a test is not run: it tests the peer's own pool of threads or processes ("internals"), or a difference we
#: chose and document in docs/guide/migrating.md ("on purpose"), or its parameters pair each of the peer's own
#: backends with that backend's expected outcome, so ours cannot be plugged in without new expectations
#: ("not pluggable"), or a gap of ours not closed yet ("gap": the behaviour is wrong and the reason says how).
KINDS = ("internals", "on purpose", "not pluggable", "gap")


@dataclass(frozen=True)
class Exclusion:
    suite: str
    test: str  #: a name, or a pattern of names (`matches`)
    kind: str
    reason: str


_MANAGER = (
    "shares a `multiprocessing.Manager()` proxy with the calls, and the manager accepts only processes that "
    "multiprocessing started from the test's own process (they inherit its authentication key)"
)
_NESTING = (
    "expects joblib's default for a Parallel inside a call, a thread pool at the first level; scaler runs that level "
    "as nested tasks on the cluster (deeper levels run sequentially, as joblib's)"
)

EXCLUSIONS: tuple[Exclusion, ...] = (
    Exclusion(
        "stdlib", "ExecutorTest.test_max_workers_negative", "internals",
        "checks the size of the pool of threads or processes an executor starts; scaler's executor starts none (the "
        "cluster's workers are its pool), so `client.executor()` takes no `max_workers`",
    ),
    Exclusion(
        "stdlib", "ExecutorShutdownTest.test_interpreter_shutdown", "on purpose",
        "expects the task's print as the bare line `apple` on the submitting interpreter's stdout; a scaler client "
        "(`stream_output=True`) prints it tagged with its task, `[task 9f3a:0] apple`. What the test is about, the "
        "work running to its end at interpreter exit, is tested in scaler's own test_executor_exit.py",
    ),
    Exclusion(
        "stdlib", "ExecutorShutdownTest.test_hang_gh83386", "on purpose",
        "as test_interpreter_shutdown (the task's print is tagged); `shutdown(wait=False)` before exit is tested in "
        "scaler's own test_executor_exit.py",
    ),
    Exclusion(
        "joblib", "test_error_capture[scaler]", "internals",
        "reads the backend's pool (`_pool` or `_workers`) and checks that it was restarted after an error; the errors "
        "themselves (ZeroDivisionError, KeyboardInterrupt, an exception with a finicky `__init__`) are checked in "
        "scaler's own test_joblib_backend.py",
    ),
    Exclusion("joblib", "test_dispatch_multiprocessing[scaler]", "internals", _MANAGER),
    Exclusion(
        "joblib", "test_initializer_*[*scaler*]", "internals",
        f"passes `initializer`/`initargs`, which set up the processes of a pool that Parallel starts (the scaler "
        f"backend refuses them, naming the workers' `--preload`); it also {_MANAGER}",
    ),
    Exclusion(
        "joblib", "test_auto_memmap_on_arrays_from_generator[scaler]", "internals",
        "checks that large arrays reach the calls as memory maps of a temporary folder the pool's processes share; "
        "scaler stores a large argument once in object storage instead",
    ),
    Exclusion(
        "joblib", "test_memmapping_leaks[scaler]", "internals",
        "checks that the pool's temporary folder of memory-mapped arrays is removed; scaler makes none",
    ),
    Exclusion("joblib", "test_nested_parallelism_limit[*scaler]", "on purpose", _NESTING),
    Exclusion("joblib", "test_nested_backend_context_manager[*scaler]", "on purpose", _NESTING),
    Exclusion(
        "joblib", "test_nested_parallel_warnings", "not pluggable",
        "its parameters pair each of joblib's backends, parent and child, with the warning that pairing gives",
    ),
    Exclusion(
        "joblib", "test_multiple_generator_call_separated_gc", "not pluggable",
        "its parameters pair each of joblib's backends with whether that backend raises when a generator is "
        "collected while running",
    ),
)  # fmt: skip


def of_suite(suite: str) -> tuple[Exclusion, ...]:
    return tuple(exclusion for exclusion in EXCLUSIONS if exclusion.suite == suite)


def matches(name: str, pattern: str) -> bool:
    """`name` is `pattern`, where each `*` stands for any text."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), name, re.DOTALL) is not None


def reason_for(suite: str, test: str) -> str | None:
    """Why `test` of `suite` is not run; None if it is."""
    for exclusion in of_suite(suite):
        if matches(test, exclusion.test):
            return exclusion.reason
    return None


def markdown_table() -> str:
    """The page's table: one row per exclusion."""
    rows = ["| suite | test | kind | why it is not run |", "|---|---|---|---|"]
    for suite in SUITES:
        for exclusion in of_suite(suite):
            rows.append(f"| {SUITES[suite]} | `{exclusion.test}` | {exclusion.kind} | {exclusion.reason} |")
    return "\n".join(rows)
