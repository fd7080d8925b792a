"""What a future's repr and notebook table show, and what showing them costs: nothing read from storage."""

from __future__ import annotations

from scaler.client.future import ScalerFuture
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID


class CountingReader:
    """A result reader (the client's) that counts its reads."""

    def __init__(self) -> None:
        self.reads = 0

    def read(self, result: m.TaskResult) -> int:
        self.reads += 1
        return 7


def test_a_repr_reads_no_value() -> None:
    """A done future's repr says finished without reading its value from storage (a notebook's display of a future
    of a large result fetched it). Fails with the repr asking exception(), which reads the value: one read."""
    reader = CountingReader()
    done = ScalerFuture(TaskID((9).to_bytes(16, "big")), reader, None)  # type: ignore[arg-type]
    assert "state=pending" in repr(done)
    done.set_task_result(m.TaskResult(done.task_id, m.ResultStatus.SUCCESS, m.PayloadKind.NONE))
    assert "state=finished" in repr(done) and "finished" in done._repr_html_()
    assert reader.reads == 0
    assert done.result(timeout=5) == 7 and reader.reads == 1
    assert "state=finished" in repr(done) and reader.reads == 1
