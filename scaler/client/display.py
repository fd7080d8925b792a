"""How clients, futures and local clusters show themselves: one line for `repr`, a small table for Jupyter
(`_repr_html_`). Plain functions of what the objects already know; nothing here talks to the scheduler."""

from __future__ import annotations

import html
from collections.abc import Sequence

Row = tuple[str, str]


def html_table(title: str, rows: Sequence[Row]) -> str:
    cells = "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(name)}</th>"
        f"<td style='text-align:left'>{html.escape(value)}</td></tr>"
        for name, value in rows
    )
    return f"<div><strong>{html.escape(title)}</strong><table>{cells}</table></div>"


def client_rows(address: str, storage: str, workers: int, unfinished: int, state: str) -> list[Row]:
    return [
        ("scheduler", address),
        ("object storage", storage),
        ("workers", str(workers)),
        ("unfinished tasks", str(unfinished)),
        ("state", state),
    ]


def cluster_rows(address: str, storage: str, monitor: str, workers: int, running: bool) -> list[Row]:
    return [
        ("scheduler", address),
        ("object storage", storage),
        ("monitor", f"{monitor}  (scaler_top {monitor})"),
        ("workers", str(workers)),
        ("state", "running" if running else "stopped"),
    ]


def future_state(done: bool, cancelled: bool, running: bool, failed: BaseException | None) -> str:
    if cancelled:
        return "cancelled"
    if not done:
        return "running" if running else "pending"
    return f"failed: {type(failed).__name__}" if failed is not None else "finished"
