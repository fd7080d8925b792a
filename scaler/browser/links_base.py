"""Where the browser client runs."""

from __future__ import annotations

import sys


def is_browser() -> bool:
    """In Pyodide (a browser, or Node.js), not CPython."""
    return sys.platform == "emscripten"
