"""Where a test run's CPU goes, process by process (opt-in, beside SCALER_TEST_CPU's per-test figures):

    .venv/bin/python -m tests.cpu_by_process REPORT [pytest arguments]

runs `python -m pytest -q -p no:cacheprovider [pytest arguments]` and, every SAMPLE_SECONDS, reads the CPU (user +
system) of every process in the run's control group (tests/run_reaper.py puts the run in one); REPORT gets each
process's last reading with its command line, then the totals by kind of command (the program and its first
arguments), most CPU first. A process that ends between two readings loses what it used since the last one, and one
that lives less than SAMPLE_SECONDS may not be seen: compare the sampled total with the run's own figure (printed by
the run reaper at the end). Linux with cgroups only (as root, where the reaper makes the run's group).

It found where the documentation tier's scaling_and_cloud.md spent its CPU (a pip install of the fake-cloud extra,
a third of the page's) and what each fake-cloud unit costs (an EC2 instance's pip install of uv, about 1.3 s).
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import time
from pathlib import Path

SAMPLE_SECONDS = 0.1
_TICKS = os.sysconf("SC_CLK_TCK")
_RUN_GROUP = re.compile(r"^(.*/scaler-test-run-[^/]+)")
_CGROUPS = Path("/sys/fs/cgroup")


def run_group(pid: int) -> Path | None:
    """The run's control group folder, once the process `pid` has joined it."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        found = _RUN_GROUP.match(path)
        if found is None:
            continue
        relative = found.group(1).lstrip("/")
        if number != "0":  # cgroup v1: the hierarchy's folder is named after its controllers (cpu,cpuacct)
            return _CGROUPS / controllers / relative
        unified = _CGROUPS / "unified"  # v2 beside v1, else v2 alone
        return (unified if unified.is_dir() else _CGROUPS) / relative
    return None


def members(group: Path) -> set[int]:
    pids: set[int] = set()
    for procs in group.rglob("cgroup.procs"):
        try:
            pids.update(int(pid) for pid in procs.read_text().split())
        except OSError:
            continue
    return pids


def cpu_and_command(pid: int) -> tuple[float, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rfind(")") + 2 :].split()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS, command


def kind_of(command: str) -> str:
    """The program's name and its first three arguments, folders and long numbers left out."""
    words = [word.rsplit("/", 1)[-1] for word in command.split()[:4]]
    return re.sub(r"\d{3,}", "N", " ".join(words))[:90]


def main(arguments: list[str]) -> int:
    if not arguments:
        raise SystemExit("usage: python -m tests.cpu_by_process REPORT [pytest arguments]")
    report, pytest_arguments = Path(arguments[0]), arguments[1:]
    pytest = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_arguments])
    seen: dict[int, tuple[float, str]] = {}
    group = None
    while pytest.poll() is None:
        try:
            group = group or run_group(pytest.pid)
        except OSError:
            break
        for pid in members(group) if group is not None else ():
            reading = cpu_and_command(pid)
            if reading is not None:
                seen[pid] = (max(reading[0], seen.get(pid, (0.0, ""))[0]), seen.get(pid, reading)[1] or reading[1])
        time.sleep(SAMPLE_SECONDS)
    by_kind: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    lines = []
    for pid, (cpu, command) in sorted(seen.items(), key=lambda item: -item[1][0]):
        lines.append(f"{cpu:8.2f} {pid} {command[:300]}")
        by_kind[kind_of(command)] += cpu
        count[kind_of(command)] += 1
    lines.append(f"{sum(cpu for cpu, _ in seen.values()):8.2f} sampled in all ({len(seen)} processes)\n\nby kind:")
    lines += [f"{cpu:8.2f} {count[kind]:5d}  {kind}" for kind, cpu in sorted(by_kind.items(), key=lambda kv: -kv[1])]
    report.write_text("\n".join(lines) + "\n")
    print(f"{report}: {len(seen)} processes, {sum(cpu for cpu, _ in seen.values()):.0f} s of CPU sampled")
    return pytest.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
