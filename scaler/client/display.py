"""How clients, futures and local clusters show themselves: one line for `repr`, a small table for Jupyter
(`_repr_html_`). Plain functions of what the objects already know; nothing here talks to the scheduler."""

from __future__ import annotations

import html
from collections.abc import Sequence

Row = tuple[str, str]

#: scheduler address -> the link of a dashboard this process serves for it (`SchedulerClusterCombo(dashboard=True)`
#: registers it), so a client of that scheduler shows the link too
DASHBOARD_LINKS: dict[str, str] = {}


def html_table(title: str, rows: Sequence[Row]) -> str:
    """A small table; a value that is an http(s) link is shown as one (opening in a new tab)."""
    cells = "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(name)}</th>"
        f"<td style='text-align:left'>{_cell(value)}</td></tr>"
        for name, value in rows
    )
    return f"<div><strong>{html.escape(title)}</strong><table>{cells}</table></div>"


def _cell(value: str) -> str:
    if value.startswith(("http://", "https://")) and " " not in value:
        link = html.escape(value, quote=True)
        return f"<a href='{link}' target='_blank'>{link}</a>"
    return html.escape(value)


def client_rows(address: str, storage: str, workers: int, unfinished: int, state: str) -> list[Row]:
    rows = [
        ("scheduler", address),
        ("object storage", storage),
        ("workers", str(workers)),
        ("unfinished tasks", str(unfinished)),
        ("state", state),
    ]
    link = DASHBOARD_LINKS.get(address)
    return [*rows, ("dashboard", link)] if link else rows


def cluster_rows(
    address: str, storage: str, monitor: str, workers: int, running: bool, dashboard: str | None = None
) -> list[Row]:
    rows = [
        ("scheduler", address),
        ("object storage", storage),
        ("monitor", f"{monitor}  (scaler_top {monitor})"),
        ("workers", str(workers)),
        ("state", "running" if running else "stopped"),
    ]
    return [*rows, ("dashboard", dashboard)] if dashboard else rows


def future_state(done: bool, cancelled: bool, running: bool, failed: BaseException | None) -> str:
    if cancelled:
        return "cancelled"
    if not done:
        return "running" if running else "pending"
    return f"failed: {type(failed).__name__}" if failed is not None else "finished"
