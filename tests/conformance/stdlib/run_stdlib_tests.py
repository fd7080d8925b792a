"""Runs CPython's own executor tests (`test.test_concurrent_futures`: the executor, shutdown, wait and as_completed
mixins) against scaler's Executor, on one local cluster, in an interpreter that ships them.

    python run_stdlib_tests.py OUTCOMES.json EXCLUDED.json

The mixins are CPython's, unchanged: each is combined with a mixin whose `executor_type` is scaler's (what
`create_executor_tests` does with the thread and process pools), so every test runs as written with our executor
where theirs would be. EXCLUDED.json maps a test ("Mixin.test_name") to why it is not run; those are skipped with
that reason. OUTCOMES.json gets one entry per test: its outcome (passed, failed, error, skipped) and the details.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import unittest
from typing import Any

import scaler_conformance_executor as adapter

from scaler import SchedulerClusterCombo

MIXINS = (
    ("test.test_concurrent_futures.executor", "ExecutorTest"),
    ("test.test_concurrent_futures.test_shutdown", "ExecutorShutdownTest"),
    ("test.test_concurrent_futures.test_wait", "WaitTests"),
    ("test.test_concurrent_futures.test_as_completed", "AsCompletedTests"),
)


class Outcomes(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.outcomes: dict[str, dict[str, str]] = {}

    def startTest(self, test: unittest.TestCase) -> None:
        super().startTest(test)
        self._started = time.monotonic()

    def _note(self, test: unittest.TestCase, outcome: str, detail: str = "") -> None:
        name = test.id().split(".")[-1]
        key = f"{test._conformance_mixin}.{name}"  # type: ignore[attr-defined]
        previous = self.outcomes.get(key)
        if previous is None or previous["outcome"] == "passed":  # a failed subtest is the test's outcome
            seconds = f"{time.monotonic() - self._started:.1f}"
            self.outcomes[key] = {"outcome": outcome, "detail": detail[-4000:], "seconds": seconds}

    def addSuccess(self, test: unittest.TestCase) -> None:
        self._note(test, "passed")

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        self._note(test, "failed", "".join(traceback.format_exception(*err)))

    def addError(self, test: unittest.TestCase, err: Any) -> None:
        self._note(test, "error", "".join(traceback.format_exception(*err)))

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        self._note(test, "skipped", reason)

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase, err: Any) -> None:
        if err is not None:
            kind = "failed" if issubclass(err[0], test.failureException) else "error"
            self._note(test, kind, "".join(traceback.format_exception(*err)))


def build_suite(excluded: dict[str, str]) -> unittest.TestSuite:
    import importlib

    from test.test_concurrent_futures import util

    class ScalerMixin(util.ExecutorMixin):
        executor_type = adapter.executor_type()

    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for module_name, mixin_name in MIXINS:
        module = importlib.import_module(module_name)
        mixin = getattr(module, mixin_name)
        namespace: dict[str, Any] = {"__name__": module_name}
        util.create_executor_tests(namespace, mixin, executor_mixins=(ScalerMixin,))
        (case,) = [value for key, value in namespace.items() if key != "__name__"]
        case._conformance_mixin = mixin_name
        for name in loader.getTestCaseNames(case):
            reason = excluded.get(f"{mixin_name}.{name}")
            if reason is not None:
                setattr(case, name, unittest.skip(f"excluded: {reason}")(getattr(case, name)))
        suite.addTests(loader.loadTestsFromTestCase(case))
    return suite


def main() -> int:
    outcomes_path, excluded_path = sys.argv[1], sys.argv[2]
    with open(excluded_path) as file:
        excluded = json.load(file)
    with SchedulerClusterCombo(n_workers=2, logging_level="WARNING") as cluster:
        os.environ[adapter.ADDRESS_VARIABLE] = cluster.get_address()
        adapter.install()
        result = Outcomes()
        build_suite(excluded).run(result)
    with open(outcomes_path, "w") as file:
        json.dump(result.outcomes, file, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
