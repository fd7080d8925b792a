"""The console commands of `pyproject.toml`'s `[project.scripts]`, one module each.

A command interrupted by Ctrl-C before its own handling of signals is in place (while its modules import, which takes
a good part of a second on a slow machine) ends with one line on stderr instead of a KeyboardInterrupt's traceback;
it still ends as a process killed by SIGINT, as Python's uncaught interrupts do (a shell sees 130). Importing this
package sets that, once, unless a hook other than Python's own is in place (IPython's, a debugger's).
"""

from __future__ import annotations

import os
import sys
from types import TracebackType


def _interrupted_in_one_line(kind: type[BaseException], error: BaseException, traceback: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        command = os.path.basename(sys.argv[0]) if sys.argv else ""
        command = command if command and not command.startswith("-") else "scaler"  # `python -c`: "-c"
        print(f"{command}: interrupted (Ctrl-C)", file=sys.stderr)
        return
    sys.__excepthook__(kind, error, traceback)


if sys.excepthook is sys.__excepthook__:
    sys.excepthook = _interrupted_in_one_line
