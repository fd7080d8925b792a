"""The folder of a process's private tunnel endpoints: ipc paths only its user may open (mode 0700), never a loopback
port another user of the machine could reach. Folders left by this user's processes that are gone are removed when
a new one is made."""

from __future__ import annotations

import os
import shutil
import tempfile

_FOLDER_PREFIX = "scaler-tunnel-"


def private_folder() -> str:
    """A new folder for this process's private endpoints (in XDG_RUNTIME_DIR when it may be written, else the
    temporary folder), after sweeping the folders of this user's processes that are gone."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base = runtime if runtime and os.access(runtime, os.W_OK) else tempfile.gettempdir()
    _sweep(base)
    return tempfile.mkdtemp(prefix=f"{_FOLDER_PREFIX}{os.getpid()}-", dir=base)


def _sweep(base: str) -> None:
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(_FOLDER_PREFIX):
            continue
        pid_text = name[len(_FOLDER_PREFIX) :].split("-", 1)[0]
        path = os.path.join(base, name)
        try:
            if not pid_text.isdigit() or os.stat(path).st_uid != os.getuid() or _alive(int(pid_text)):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
