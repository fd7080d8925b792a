"""Exit codes of scaler's processes: the one table of them (supervisors and the launcher read them).

Workers and worker managers end with `ExitCode`; the scheduler and object storage server with OK or
ERROR; every command refuses settings it cannot run with `EXIT_CONFIGURATION` before starting anything.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    ERROR = 1  #: refused by the scheduler, a component that failed, a bad address given to a process
    NEVER_CONNECTED = 2  #: the scheduler never answered within the timeout (workers, managers)
    SCHEDULER_LOST = 3  #: the scheduler stopped answering (workers, managers)


#: Settings a command cannot run (argparse's convention for usage errors). The same number as
#: NEVER_CONNECTED: a configuration error is refused before any connection is tried, so the two never meet.
EXIT_CONFIGURATION = 2
