"""Compatibility rules checked by every hello: same protocol version, same Python major.minor."""

from __future__ import annotations

import platform

from scaler.protocol.messages import PROTOCOL_VERSION


def local_python_version() -> str:
    return platform.python_version()


def incompatibility(protocol_version: int, python_version: str, role: str = "peer") -> str | None:
    """Why a peer cannot join, or None when it can. The text is shown on both sides."""
    if protocol_version != PROTOCOL_VERSION:
        return (
            f"{role} speaks protocol version {protocol_version}, this side speaks {PROTOCOL_VERSION}: "
            f"install the same scaler version on both sides"
        )
    ours = local_python_version()
    if python_version.split(".")[:2] != ours.split(".")[:2]:
        return (
            f"{role} runs Python {python_version}, this side runs Python {ours}: functions pickled by one "
            f"Python minor version cannot run on another; use the same Python {'.'.join(ours.split('.')[:2])}"
        )
    return None
