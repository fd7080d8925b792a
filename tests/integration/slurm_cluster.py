"""A real Slurm on this one machine, for the Slurm worker manager's tests: Debian's munged, slurmctld and slurmd,
started by the test process without systemd from a state folder of their own, and stopped after.

- `slurm.conf` declares this host (NodeAddr 127.0.0.1: the daemons' traffic stays on loopback) with 8 CPUs and
  16000 MB whatever the machine has (`SlurmdParameters=config_overrides`), so that four one-CPU workers fit on two
  cores; `select/cons_tres` with `CR_CPU_Memory` (a job's `--mem` is its share; 500 MB a CPU when it gives none);
  `proctrack/linuxproc`; a cancel's SIGKILL 5 s after its SIGTERM (`KillWait`); ended jobs stay in
  `squeue --states all` for MinJobAge; a job-completion log (`jobcomp/filetxt`); no accounting (`sacct` has no data,
  as on our CI machines); a node set DOWN stays down until RESUME (`ReturnToService=1`).
- Three partitions: `debug` (the default), `limited` (30 minutes at most, which a test lowers to make its jobs
  impossible), and `urgent` (PriorityTier 2): its jobs preempt the others' (`preempt/partition_prio`, `PreemptMode=
  CANCEL`), as another user's job of a higher-priority partition does on a real cluster.
- Memory is enforced as most clusters do, where the machine has a writable cgroup v1 memory hierarchy (`task/cgroup`
  with `ConstrainRAMSpace`, `cgroup.conf` in the state folder): the kernel kills a process of a job past its `--mem`,
  and Slurm ends the job OUT_OF_MEMORY. The slurmd runs in a memory cgroup of its own, named for tests/reaping.py
  (`scaler-test-<pid of the test process>-slurm-*`), as the root of a cgroup namespace, with the memory hierarchy
  mounted again in a mount namespace of its own: Slurm's groups (`slurm_<node>/uid_0/job_<id>/...`) are made under
  it and not at the hierarchy's root, where two test processes' clusters (whose job ids both start at 1) would
  share them, and a job's worker finds its limit where it looks (`/proc/self/cgroup` under /sys/fs/cgroup/memory).
  Elsewhere (cgroup v2, no root) jobs run unconfined (`task/none`) and `memory_skip_reason` says why.
- SlurmctldPort and SlurmdPort are free ports drawn at start, not 6817/6818, so that two runs on one machine do not
  meet; munged listens on a socket in the state folder (`AuthInfo=socket=...`; munged wants its folder mode 0711).
- The state folder is `<tmp>/scaler-slurm-<pid of the test process>-*`: the run's reaper removes it when the run is
  killed (tests/reaping.py), and kills the daemons, their slurmstepd and the jobs with the run's control group.
  Where there is none (the reaper then knows the run's processes by SCALER_TEST_RUN in their environment), the
  daemons inherit the variable from the test process, and a TaskProlog exports it to every job (which starts
  from a login environment, `--export=NONE`), so that the jobs' workers are the run's too.
- Stopping cancels every job first, whoever submitted it (slurmstepd outlives slurmd), waits for squeue to be empty,
  then stops the daemons and removes the memory cgroup (after killing what is left in it).

Where Slurm cannot be had (not root, the packages missing: `make test-tools` installs them with apt-get), `skip_reason`
says why and the tests skip.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from scaler.io.address import free_tcp_port_block
from tests.reaping import RUN_VARIABLE, group_pids, kill_all, remove_groups

if TYPE_CHECKING:
    import psutil

#: The programs a local Slurm needs, and their Debian packages.
PROGRAMS = {
    "munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "sbatch": "slurm-client",
    "squeue": "slurm-client", "scancel": "slurm-client", "sinfo": "slurm-client", "scontrol": "slurm-client",
}  # fmt: skip
#: CPUs the node declares (more than the machine has: jobs need slots, not cores), its memory (MB: what jobs may
#: ask for in all; each job's own `--mem` is what the kernel holds it to), and a job's memory when it asks for none.
NODE_CPUS = 8
NODE_MEMORY_MB = 16000
DEFAULT_MEMORY_PER_CPU_MB = 500
#: The partition whose jobs preempt the others'.
URGENT_PARTITION = "urgent"
START_SECONDS = 60.0
STOP_SECONDS = 60.0
#: The cgroup v1 memory hierarchy the jobs' memory is enforced in.
MEMORY_HIERARCHY = Path("/sys/fs/cgroup/memory")
#: Run by `sh -c` in the slurmd's new mount and cgroup namespaces: the memory hierarchy mounted again, rooted at the
#: slurmd's group (the cgroup namespace's root), over the machine-wide mount; then the slurmd ("$0" "$@").
_REMOUNT = (
    f'umount -l {MEMORY_HIERARCHY} && mount -t cgroup -o memory scaler-slurm {MEMORY_HIERARCHY} && exec "$0" "$@"'
)


def skip_reason() -> str | None:
    """Why a local Slurm cannot run here, or None."""
    if os.geteuid() != 0:
        return "a local Slurm needs root (its daemons, and munged run as the munge user)"
    missing = sorted({package for program, package in PROGRAMS.items() if shutil.which(program) is None})
    if missing:
        return f"Slurm is not installed (apt-get install {' '.join(missing)}; `make test-tools` does it as root)"
    try:
        import pwd

        pwd.getpwnam("munge")
    except KeyError:
        return "the munge user is missing (the munge package makes it)"
    return None


def memory_enforcement_problem() -> str | None:
    """Why this machine's Slurm cannot enforce jobs' memory (cgroup v1, task/cgroup), or None."""
    if os.geteuid() != 0:
        return "enforcing jobs' memory needs root"
    if not (MEMORY_HIERARCHY / "cgroup.procs").exists():
        return (
            f"no cgroup v1 memory hierarchy at {MEMORY_HIERARCHY} (Slurm's cgroup/v2 needs systemd or a delegated tree)"
        )
    if not os.access(MEMORY_HIERARCHY, os.W_OK):
        return f"{MEMORY_HIERARCHY} is not writable here"
    missing = [program for program in ("unshare", "mount", "umount") if shutil.which(program) is None]
    if missing:
        return f"{', '.join(missing)} missing (util-linux): the slurmd's namespaces cannot be made"
    return None


class SlurmCluster:
    """munged, slurmctld and slurmd of one test process, and the commands' environment (`SLURM_CONF`)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.conf = state / "slurm.conf"
        self.node = socket.gethostname().split(".")[0]
        self._daemons: list[subprocess.Popen[bytes]] = []
        self.memory_skip_reason = memory_enforcement_problem()
        #: the slurmd's memory cgroup, root of its cgroup namespace (None: memory not enforced)
        self.memory_group = (
            MEMORY_HIERARCHY / f"scaler-test-{os.getpid()}-slurm-{state.name.rsplit('-', 1)[-1]}"
            if self.memory_skip_reason is None
            else None
        )

    @property
    def environment(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    # ------------------------------------------------------------ start and stop

    def start(self) -> None:
        munge = self.state / "munge"
        munge.mkdir(mode=0o711)
        os.chmod(munge, 0o711)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        shutil.chown(munge, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        for folder in ("spool", "ctld", "log"):
            (self.state / folder).mkdir()
        controller_port = free_tcp_port_block(2)
        node_port = controller_port + 1
        prolog = self.state / "task_prolog.sh"  # a job's tasks are the run's (tests/reaping.py, by environment)
        run = shlex.quote(os.environ.get(RUN_VARIABLE, ""))
        prolog.write_text(f"#!/bin/sh\n[ -z {run} ] || echo export {RUN_VARIABLE}={run}\n")
        prolog.chmod(0o755)
        self.conf.write_text(self.configuration(controller_port, node_port))
        if self.memory_group is not None:  # read by the slurmd from slurm.conf's folder
            swap = (MEMORY_HIERARCHY / "memory.memsw.limit_in_bytes").exists()  # no swapping past the limit either
            (self.state / "cgroup.conf").write_text(
                "CgroupPlugin=cgroup/v1\nConstrainRAMSpace=yes\n" + ("ConstrainSwapSpace=yes\n" if swap else "")
            )
        logs = self.state / "log"
        self._start(
            ["runuser", "-u", "munge", "--", shutil.which("munged") or "munged", "--foreground",
             f"--key-file={key}", f"--socket={munge / 'munge.socket'}", f"--pid-file={munge / 'munged.pid'}",
             f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}"],
            logs / "munged.out",
        )  # fmt: skip
        self._wait(lambda: (munge / "munge.socket").exists(), "munged's socket")
        self._start(["slurmctld", "-D", "-f", str(self.conf)], logs / "slurmctld.out")
        slurmd = ["slurmd", "-D", "-f", str(self.conf), "-N", self.node]
        if self.memory_group is not None:
            self.memory_group.mkdir()
            # in new mount and cgroup namespaces: the shell moves itself into the group, then unshares the cgroup
            # namespace (rooted at the group it is in), remounts the memory hierarchy and becomes the slurmd
            join = (
                f"echo $$ > {self.memory_group / 'cgroup.procs'} && exec unshare --cgroup sh -c {shlex.quote(_REMOUNT)}"
            )
            slurmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{join} "$0" "$@"', *slurmd]
        self._start(slurmd, logs / "slurmd.out")
        self._wait(self.is_idle, "the node idle in sinfo")

    def stop(self) -> None:
        """Cancel every job, wait for squeue to be empty, stop the daemons, remove the state folder."""
        try:
            if self._daemons and all(daemon.poll() is None for daemon in self._daemons):
                with contextlib.suppress(subprocess.SubprocessError, OSError):
                    every = [job_id for job_id, _, _ in self.jobs()]  # the tests' other users' jobs too
                    if every:
                        self.run("scancel", *every)
                    deadline = time.monotonic() + STOP_SECONDS
                    while self.jobs() and time.monotonic() < deadline:
                        time.sleep(0.5)
        finally:
            for daemon in reversed(self._daemons):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(daemon.pid, signal.SIGTERM)
            for daemon in reversed(self._daemons):
                try:
                    daemon.wait(STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(daemon.pid, signal.SIGKILL)
                    daemon.wait(STOP_SECONDS)
            group = self.memory_group
            if group is not None and group.exists():
                kill_all(lambda: group_pids(group), set())
                remove_groups(group)
            shutil.rmtree(self.state, ignore_errors=True)

    def configuration(self, controller_port: int, node_port: int) -> str:
        state, node = self.state, self.node
        return "\n".join([
            "ClusterName=scalertest",
            f"SlurmctldHost={node}(127.0.0.1)",
            f"SlurmctldPort={controller_port}",
            f"SlurmdPort={node_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={state / 'munge' / 'munge.socket'}",
            f"StateSaveLocation={state / 'ctld'}",
            f"SlurmdSpoolDir={state / 'spool'}",
            f"SlurmctldPidFile={state / 'slurmctld.pid'}",
            f"SlurmdPidFile={state / 'slurmd.pid'}",
            f"SlurmctldLogFile={state / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={state / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/cgroup" if self.memory_group is not None else "TaskPlugin=task/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU_Memory",
            f"DefMemPerCPU={DEFAULT_MEMORY_PER_CPU_MB}",
            "PreemptType=preempt/partition_prio",
            "PreemptMode=CANCEL",
            "SlurmdParameters=config_overrides",
            "ReturnToService=1",
            "KillWait=5",
            "MinJobAge=600",
            "MpiDefault=none",
            f"TaskProlog={state / 'task_prolog.sh'}",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={state / 'log' / 'jobcomp.txt'}",
            "AccountingStorageType=accounting_storage/none",
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} State=UNKNOWN",
            f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP",
            f"PartitionName=limited Nodes={node} MaxTime=30 State=UP",
            f"PartitionName={URGENT_PARTITION} Nodes={node} MaxTime=INFINITE PriorityTier=2 State=UP",
            "",
        ])  # fmt: skip

    # ------------------------------------------------------------ commands

    def run(self, command: str, *arguments: str, check: bool = True) -> str:
        done = subprocess.run(
            [command, *arguments], capture_output=True, text=True, env=self.environment, timeout=60, check=False
        )
        if check and done.returncode != 0:
            raise subprocess.SubprocessError(f"{command} {' '.join(arguments)}: {done.stderr.strip()}")
        return done.stdout

    def jobs(self, name: str | None = None, states: str = "") -> list[tuple[str, str, str]]:
        """(job id, state, reason) of the jobs squeue lists (of `name`; those alive, or `states`)."""
        arguments = ["--noheader", "--format=%i|%T|%r"]
        arguments += [f"--name={name}"] if name else []
        arguments += [f"--states={states}"] if states else []
        lines = self.run("squeue", *arguments).splitlines()
        return [(fields[0], fields[1], fields[2]) for fields in (line.split("|") for line in lines) if len(fields) == 3]

    def is_idle(self) -> bool:
        try:
            return self.run("sinfo", "--noheader", "--format=%t", f"--nodes={self.node}").split() == ["idle"]
        except subprocess.SubprocessError:
            return False

    def job_processes(self, job_id: str) -> list[int]:
        """The pids of this cluster's job `job_id` (its environment says so)."""
        return [process.pid for process in processes_of_job(job_id, str(self.conf))]

    # ------------------------------------------------------------ helpers

    def _start(self, argv: list[str], log: Path) -> None:
        with log.open("wb") as output:
            self._daemons.append(
                subprocess.Popen(
                    argv, stdout=output, stderr=subprocess.STDOUT, env=self.environment, start_new_session=True
                )
            )

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + START_SECONDS
        while not ready():  # type: ignore[operator]
            for daemon in self._daemons:
                if daemon.poll() is not None:
                    raise RuntimeError(f"{daemon.args[0]} exited ({daemon.returncode}) before {what}: {self.logs()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} after {START_SECONDS:g} s: {self.logs()}")
            time.sleep(0.2)

    def logs(self) -> str:
        tails = []
        for path in sorted((self.state / "log").glob("*")):
            with contextlib.suppress(OSError):
                tails.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(tails)


def processes_of_job(job_id: str, conf: str) -> list[psutil.Process]:
    """The processes of job `job_id` of the Slurm configured by `conf`: their environment names both."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            environment = process.environ()
        except (psutil.Error, OSError):
            continue
        if environment.get("SLURM_JOB_ID") == job_id and environment.get("SLURM_CONF") == conf:
            found.append(process)
    return found


@contextlib.contextmanager
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A started cluster, stopped (jobs cancelled first) however the block ends."""
    state = Path(tempfile.mkdtemp(prefix=f"scaler-slurm-{os.getpid()}-"))
    os.chmod(state, 0o755)  # munged (the munge user) reaches its socket's folder through it
    cluster = SlurmCluster(state)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
