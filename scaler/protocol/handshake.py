"""Compatibility rules checked by every hello: same protocol version, same Python major.minor."""

from __future__ import annotations

import platform

from scaler.protocol.messages import PROTOCOL_VERSION


def local_python_version() -> str:
    return platform.python_version()


def incompatibility(protocol_version: int, python_version: str, ours: str | None, role: str = "peer") -> str | None:
    """Why a peer cannot join, or None when it can. The text is shown on both sides.

    `ours` is this side's Python version (given, not read here, so that pure cores stay pure); None when
    this side never unpickles what the peer sends (object storage), so only the protocol version counts."""
    if protocol_version != PROTOCOL_VERSION:
        return (
            f"{role} speaks protocol version {protocol_version}, this side speaks {PROTOCOL_VERSION}: "
            f"install the same scaler version on both sides"
        )
    if ours is not None and python_version.split(".")[:2] != ours.split(".")[:2]:
        return (
            f"{role} runs Python {python_version}, this side runs Python {ours}: functions pickled by one "
            f"Python minor version cannot run on another; use the same Python {'.'.join(ours.split('.')[:2])}"
        )
    return None
