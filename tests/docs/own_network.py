"""A page's network of its own: a network namespace whose loopback is the page's alone, so that the docs' ports (a
scheduler's 8516-8518, the fake cloud's 5000, ...) are free in it whatever runs beside it, with the outside reached
as from the machine (the package index of a `pip install`, of the fake cloud's units) through slirp4netns, a network
stack in a process of its own that adds no address, route or firewall rule to the machine. The namespace goes when
its last process ends.

Every command of the page runs in it through `nsenter --net=...` (the prefix `own_network` yields), which enters the
namespace and executes the command in place: the command keeps its pid, its process group and its environment, and
the tier watches and stops it as any other.

The namespace's two keepers (the process that holds it, slirp4netns) are the test process's children, killed at the
end of the block, and by the kernel when the test process dies (setpriv's parent-death signal), so that a run killed
mid-page leaves neither; the page's own processes are the run's, which the suite's reaper kills (tests/reaping.py);
the namespace, which has no name, goes with the last of them.

Needs root, unshare, nsenter, setpriv (util-linux) and slirp4netns (the Debian package of that name, which `make test`
installs); where one is missing or the kernel refuses, `unavailable()` says why and the pages at the docs' ports run
one after another instead (tests/docs/test_pages.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from typing import IO

#: The programs a network of its own needs.
PROGRAMS = ("unshare", "nsenter", "setpriv", "slirp4netns")
#: What a keeper of the namespace runs behind: killed when the test process that started it dies.
KEPT = ("setpriv", "--pdeathsig", "KILL", "--")


@functools.cache
def unavailable() -> str | None:
    """Why a page cannot have a network of its own here (None: it can)."""
    if os.geteuid() != 0:
        return "not root"
    missing = [program for program in PROGRAMS if shutil.which(program) is None]
    if missing:
        return f"no {' and '.join(missing)}"
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"`unshare --net` fails here: {probe.stderr.strip()}"
    return None


@contextlib.contextmanager
def own_network() -> Iterator[tuple[str, ...]]:
    """A network namespace for the block, reaching the outside through slirp4netns; yields the argv prefix that runs
    a command in it."""
    with contextlib.ExitStack() as keepers:
        holder = keepers.enter_context(_kept(
            [*KEPT, "unshare", "--net", "--", "sh", "-c", "echo up; exec sleep infinity"], subprocess.PIPE,
        ))  # fmt: skip
        assert holder.stdout is not None
        if holder.stdout.readline() != b"up\n":  # the shell speaks from inside the new namespace
            raise RuntimeError(f"`unshare --net` exited with {holder.wait()}")
        log = keepers.enter_context(tempfile.TemporaryFile())  # slirp4netns's lines, read when it fails
        ready_read, ready_write = os.pipe()
        with os.fdopen(ready_read, "rb") as ready:
            try:
                keepers.enter_context(_kept(
                    [*KEPT, "slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
                     "--ready-fd", str(ready_write), str(holder.pid), "tap0"],
                    log, pass_fds=(ready_write,),
                ))  # fmt: skip
            finally:
                os.close(ready_write)
            if ready.read(1) != b"1":  # written once the namespace's interfaces are up (lo too); closed if it died
                log.seek(0)
                raise RuntimeError(f"slirp4netns did not set the network up: {log.read().decode()[-500:]}")
        yield ("nsenter", f"--net=/proc/{holder.pid}/ns/net", "--")


@contextlib.contextmanager
def _kept(
    argv: list[str], output: int | IO[bytes], pass_fds: tuple[int, ...] = ()
) -> Iterator[subprocess.Popen[bytes]]:
    """A keeper of the namespace (its output and errors to `output`), killed when the block ends."""
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=output, pass_fds=pass_fds) as process:
        try:
            yield process
        finally:
            process.kill()
