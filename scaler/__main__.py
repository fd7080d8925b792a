# PYTHON_ARGCOMPLETE_OK
"""`python -m scaler`: the `scaler` command (`python -m scaler FILE`, `python -m scaler --example local`)."""

from __future__ import annotations

from scaler.entry_points.launcher import main

if __name__ == "__main__":
    raise SystemExit(main())
