# PYTHON_ARGCOMPLETE_OK
"""`python -m scaler.entry_points.scaler FILE`: the same as the `scaler FILE` command."""

from __future__ import annotations

from scaler.entry_points.launcher import main

if __name__ == "__main__":
    raise SystemExit(main())
