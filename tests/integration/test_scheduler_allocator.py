"""The scheduler process runs on glibc's malloc (`scaler.scheduler.allocator`): memory a drained queue filled goes
back with `malloc_trim`, where CPython's arenas stay pinned by the few objects that outlive the drain. Checked on the
real command: the running scheduler (the same pid the launcher started) has PYTHONMALLOC=malloc in the environment it
was executed with, its object storage child does not inherit it, and a PYTHONMALLOC the user set is obeyed. Checked
with `use_the_system_allocator` switched off: the first test fails (no PYTHONMALLOC in the scheduler's environment).
And its heap thresholds stay where `fix_heap_thresholds` puts them: the same program without the call shows glibc
moving them (the last test's control).
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from scaler.scheduler.allocator import HEAP_THRESHOLD_BYTES, MARK
from tests.integration.conftest import COLD_START_SECONDS, Launcher, Service, free_addresses, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator: Linux only"),
]


def _on_glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


ON_GLIBC = _on_glibc()


def _glibc_version() -> tuple[int, ...]:
    """glibc's version ((0,) off glibc): `mallinfo2`, which the heap probe reads, came with 2.33."""
    if not ON_GLIBC:
        return (0,)
    text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    try:
        return tuple(int(part) for part in text.split()[-1].split("."))
    except ValueError:
        return (0,)


def environment_of(pid: int) -> dict[str, str]:
    """The environment a process was executed with (/proc: what its last execve was given)."""
    with open(f"/proc/{pid}/environ", "rb") as environ:
        pairs = [entry.split(b"=", 1) for entry in environ.read().split(b"\0") if b"=" in entry]
    return {name.decode(): value.decode(errors="replace") for name, value in pairs}


@pytest.mark.timeout(120)
def test_the_scheduler_runs_on_glibcs_malloc_and_its_children_do_not_inherit_it(launcher: Launcher) -> None:
    addresses = free_addresses()
    launcher.object_storage(addresses.object_storage)
    scheduler = launcher.scheduler(addresses, "--insecure")  # waits until it answers
    environment = environment_of(scheduler.popen.pid)
    assert environment.get("PYTHONMALLOC") == "malloc" and environment.get(MARK) == "1", environment
    assert scheduler.is_running()


@pytest.mark.timeout(120)
def test_a_pythonmalloc_the_user_set_is_obeyed_and_the_storage_child_gets_the_default(launcher: Launcher) -> None:
    addresses = free_addresses()
    scheduler = launcher.start("scaler_scheduler", addresses.scheduler, "--insecure", env={"PYTHONMALLOC": "pymalloc"})
    own = launcher.start("scaler_scheduler", free_addresses().scheduler, "--insecure")

    def storage_of(service: Service) -> psutil.Process | None:
        children = psutil.Process(service.popen.pid).children()
        found = [child for child in children if "scaler.object_storage.server" in " ".join(child.cmdline())]
        return found[0] if found else None

    wait_for(lambda: storage_of(scheduler) is not None and storage_of(own) is not None, "the storage children",
             COLD_START_SECONDS)  # fmt: skip
    assert environment_of(scheduler.popen.pid).get("PYTHONMALLOC") == "pymalloc"
    assert MARK not in environment_of(scheduler.popen.pid)
    child = storage_of(own)
    assert child is not None and "PYTHONMALLOC" not in environment_of(child.pid)
    assert environment_of(own.popen.pid).get("PYTHONMALLOC") == "malloc"


#: Frees a block of 8 MiB (a mapping of its own: with glibc's moving thresholds, blocks up to 8 MiB then come from the
#: heap), then asks for one of 1 MiB and prints how many more mapped blocks glibc counts (`mallinfo2().hblks`): 1 if
#: the block got a mapping of its own, 0 if it came from the heap.
PROBE = """
import ctypes, sys
from scaler.scheduler.allocator import fix_heap_thresholds
if sys.argv[1] == "fixed":
    assert fix_heap_thresholds()
class MallInfo2(ctypes.Structure):
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(name, ctypes.c_size_t) for name in names.split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.free(libc.malloc(8 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(1 << 20)
print(libc.mallinfo2().hblks - before)
libc.free(block)
"""


@pytest.mark.timeout(60)
@pytest.mark.skipif(_glibc_version() < (2, 33), reason="glibc 2.33 or later (the probe reads mallinfo2)")
def test_the_heap_thresholds_stay_fixed_after_a_big_block_is_freed() -> None:
    assert HEAP_THRESHOLD_BYTES < 1 << 20

    def mapped_blocks_added(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.strip())

    assert mapped_blocks_added("fixed") == 1  # 1 MiB is above the fixed threshold: a mapping of its own
    assert mapped_blocks_added("moving") == 0  # the control: glibc moved its threshold to 8 MiB, so the heap served it
