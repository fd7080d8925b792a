"""In a real Jupyter kernel (ipykernel, driven through jupyter_client), `client.map(..., progress=True)` shows a
widget (a display_data with the widget-view MIME type) where ipywidgets is installed, and the cluster's display
carries the dashboard link. Skipped with the reason when ipykernel, jupyter_client or ipywidgets is missing."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        any(importlib.util.find_spec(name) is None for name in ("ipykernel", "jupyter_client", "ipywidgets")),
        reason="ipykernel, jupyter_client and ipywidgets are needed (pip install -e '.[test]')",
    ),
]

CELL = """
from scaler import Client, SchedulerClusterCombo

def inc(x):
    return x + 1

with SchedulerClusterCombo(n_workers=1, dashboard=True, logging_level="ERROR") as cluster:
    display(cluster)
    with Client(cluster.get_address()) as client:
        print("sum", sum(client.map(inc, range(50), progress=True)))
"""


def run_cell(code: str) -> list[dict[str, Any]]:
    from jupyter_client.manager import start_new_kernel

    manager, kernel = start_new_kernel(kernel_name="python3")
    try:
        msg_id = kernel.execute(code)
        messages = []
        while True:
            message = kernel.get_iopub_msg(timeout=90)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            messages.append(message)
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                return messages
    finally:
        kernel.stop_channels()
        manager.shutdown_kernel()


def test_the_progress_bar_is_a_widget_and_the_cluster_shows_its_dashboard_link() -> None:
    """Checked by switching it off: with tqdm.std instead of tqdm.auto in scaler/client/progress.py the bar is
    text on stderr and no widget-view display arrives."""
    messages = run_cell(CELL)
    errors = [m["content"] for m in messages if m["msg_type"] == "error"]
    assert not errors, errors
    displays = [m["content"]["data"] for m in messages if m["msg_type"] == "display_data"]
    assert any("application/vnd.jupyter.widget-view+json" in data for data in displays), displays
    assert any("<a href='http://127.0.0.1:" in data.get("text/html", "") for data in displays), displays
    printed = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
    assert "sum 1275" in printed, printed
