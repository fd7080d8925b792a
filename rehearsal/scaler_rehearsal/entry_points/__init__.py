"""The rehearsals' console commands (`[project.scripts]` of rehearsal/pyproject.toml), one module each.

Importing `scaler.entry_points` gives them what the product's commands have: a Ctrl-C during the imports ends with
one line on stderr, not a traceback (that package says how).
"""

import scaler.entry_points  # noqa: F401
