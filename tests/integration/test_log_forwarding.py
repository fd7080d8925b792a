"""`Client.forward_logging`: the logging records of a client's tasks reach the client's logging under the same
logger names, with task_id and worker attributes; level and logger filters apply on the worker; a task logging
hundreds of thousands of lines forwards a bounded number and says how many it dropped."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.worker.log_forwarding import DROP_LOGGER, MAX_RECORDS_PER_TASK
from tests.integration.conftest import running_cluster, wait_for

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.xdist_group("test_log_forwarding")]


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def cluster() -> Iterator[SchedulerClusterCombo]:
    with running_cluster(1) as started:
        yield started


@pytest.fixture
def kept() -> Iterator[Kept]:
    handler = Kept()
    for name in ("user", DROP_LOGGER, "other"):
        logging.getLogger(name).addHandler(handler)
    try:
        yield handler
    finally:
        for name in ("user", DROP_LOGGER, "other"):
            logging.getLogger(name).removeHandler(handler)


def log_some(count: int) -> int:
    import logging

    logging.getLogger("user.tasks").debug("not forwarded: below the level")
    logging.getLogger("other").warning("not forwarded: another logger")
    for index in range(count):
        logging.getLogger("user.tasks").info("line %d of the task", index)
    try:
        raise ValueError("inside the task")
    except ValueError:
        logging.getLogger("user.tasks").exception("a failure, logged")
    return count


def test_records_reach_the_client_under_their_logger_with_task_and_worker(
    cluster: SchedulerClusterCombo, kept: Kept
) -> None:
    """Checked by switching it off: without the forward_logging call no record arrives and the wait times out."""
    with Client(cluster.get_address()) as client:
        client.forward_logging("user", logging.INFO)
        future = client.submit(log_some, 3)
        assert future.result(timeout=60) == 3
        wait_for(lambda: len(kept.records) >= 4, "4 forwarded records", 30)
    names = {record.name for record in kept.records}
    assert names == {"user.tasks"}, names  # neither the DEBUG record nor the other logger's
    messages = [record.getMessage() for record in kept.records]
    assert messages == ["line 0 of the task", "line 1 of the task", "line 2 of the task", "a failure, logged"]
    assert all(record.task_id == future.task_id.hex() for record in kept.records)  # type: ignore[attr-defined]
    assert all(record.worker.startswith("Worker|") for record in kept.records)  # type: ignore[attr-defined]
    assert "ValueError: inside the task" in (kept.records[-1].exc_text or "")
    assert kept.records[0].levelname == "INFO" and kept.records[-1].levelno == logging.ERROR


def test_a_chatty_task_forwards_a_bounded_number_and_says_how_many_it_dropped(
    cluster: SchedulerClusterCombo, kept: Kept
) -> None:
    """200,000 lines: MAX_RECORDS_PER_TASK arrive, then one warning with the count of the rest. Checked by
    switching it off: without the bound all 200,001 records arrive and the count assertion fails."""
    lines = 200_000
    with Client(cluster.get_address()) as client:
        client.forward_logging("user")
        assert client.submit(log_some, lines).result(timeout=100) == lines
        wait_for(lambda: any(r.name == DROP_LOGGER for r in kept.records), "the dropped-records warning", 60)
        assert client.submit(log_some, 0).result(timeout=60) == 0  # the cluster is still responsive
    task_records = [record for record in kept.records if record.name == "user.tasks"]
    assert len(task_records) >= MAX_RECORDS_PER_TASK  # the first task's bound, and the second task's one record
    (warning,) = [record for record in kept.records if record.name == DROP_LOGGER]
    dropped = lines + 2 - MAX_RECORDS_PER_TASK  # the DEBUG line (no level asked), the lines and the exception
    assert warning.levelno == logging.WARNING and f"{dropped} logging records of task" in warning.getMessage()


SHOWN_ONCE = """
import logging
from scaler import Client, SchedulerClusterCombo

def job(x):
    logging.getLogger("user.tasks").warning("record of task %s", x)
    return x

if __name__ == "__main__":
    logging.basicConfig(format="%(name)s %(levelname)s: %(message)s")
    with SchedulerClusterCombo(n_workers=1) as cluster, Client(cluster.get_address()) as client:
        client.forward_logging()
        print(client.map(job, [1, 2]))
"""


def test_under_a_local_cluster_each_forwarded_record_is_shown_once(tmp_path: Path) -> None:
    """issue 60: a program that configures logging, starts SchedulerClusterCombo and forwards its tasks' logging
    saw each record three times: the forwarded one, the worker's log line (its workers share the program's
    terminal) and the line of the program's handler the forked workers inherited. The processor's handlers skip a
    record it forwards now. Checked to fail without that filter (the code before it): 3 lines each."""
    script = tmp_path / "shown_once.py"
    script.write_text(SHOWN_ONCE)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=100, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "[1, 2]" in done.stdout, output
    assert output.count("record of task 1") == 1 and output.count("record of task 2") == 1, output
    assert "user.tasks WARNING: record of task 1" in done.stderr, output  # the client's handler shows it
