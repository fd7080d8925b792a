"""The first process of a rig host: `python host_init.py NAME SHARED...`, started by the rig as PID 1 of the host's
new PID namespace, inside its network namespace and a mount, UTS and IPC namespace of its own (`unshare`).

It makes the host separate, then reaps what is orphaned on it until it is killed; killing it kills every process of
the host at once (the kernel ends a PID namespace with its first process), which is how a host dies:

- a private tmpfs on /dev/shm (so objects in shared memory are the host's own) and on /tmp (tools' state: Ray's
  session folder, sockets), with each SHARED folder under /tmp (the test's folder, the session's keys) bound back at
  its path;
- a /proc of its own PID namespace (pids that a process writes down mean the same to the host's other processes);
- its host name.

It prints "ready" once done. Standard library only, so that it starts at once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys


def mount(*argv: str) -> None:
    completed = subprocess.run(["mount", *argv], capture_output=True, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"rig host: mount {' '.join(argv)}: {completed.stderr.strip()}")


def separate(name: str, shared: list[str]) -> None:
    mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm")
    kept = []
    for index, path in enumerate(folder for folder in shared if folder.startswith("/tmp/")):
        holder = f"/dev/shm/.rig-keep-{index}"  # /tmp is about to be covered: hold the folder here meanwhile
        os.mkdir(holder)
        mount("--bind", path, holder)
        kept.append((holder, path))
    mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp")
    for holder, path in kept:
        os.makedirs(path, exist_ok=True)
        mount("--move", holder, path)
        os.rmdir(holder)
    os.makedirs("/tmp/home", mode=0o700, exist_ok=True)
    mount("-t", "proc", "proc", "/proc")
    socket.sethostname(name)


def reap_forever() -> None:
    """Reap orphans as they end; stop on SIGTERM or SIGINT (PID 1 gets no signal it does not handle)."""
    wanted = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    while True:
        while True:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if signal.sigwait(wanted) != signal.SIGCHLD:
            return


def main() -> None:
    name, *shared = sys.argv[1:]
    separate(name, shared)
    print("ready", flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the rig stops reading: nothing more is written there
    reap_forever()


if __name__ == "__main__":
    main()
