"""The processes of a scale run: the real scheduler (`scaler_scheduler --insecure`) and the fleets of fake peers, each
in a session of its own, read with psutil (CPU seconds, RSS) and always ended, also when a run fails."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import psutil

from scale import callgrind

BENCH_DIR = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MB = 1 << 20


def free_port_block(size: int = 3) -> int:
    """A port p with p .. p + size - 1 free (the scheduler binds p, its storage p + 1, its monitor p + 2): one the
    system would give, else one below its ephemeral range (a machine whose other runs left tens of thousands of
    connections in TIME-WAIT has no three free in a row there)."""
    for attempt in range(200):
        if attempt < 100:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = int(probe.getsockname()[1])
        else:
            port = random.randrange(10_000, 30_000)
        if port + size < 65000 and all(_free(port + offset) for offset in range(size)):
            return port
    raise RuntimeError("no block of free ports found")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _end(process: subprocess.Popen[Any], grace: float = 10.0) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class Scheduler:
    """A scheduler process with its own object storage (port + 1) and monitor feed (port + 2)."""

    def __init__(self, log: Path, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port_block()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.monitor_address = f"tcp://127.0.0.1:{self.port + 2}"
        self._log: IO[bytes] = open(log, "ab")
        command = callgrind.wrap([str(BIN / "scaler_scheduler"), "--insecure", *extra, self.address])
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.psutil = psutil.Process(self.process.pid)
        deadline = time.monotonic() + (600 if callgrind.folder() else 60)
        while not self._listening():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the scheduler did not start (its log: {log})")
            time.sleep(0.1)

    def _listening(self) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def cpu_seconds(self) -> float:
        times = self.psutil.cpu_times()
        return float(times.user + times.system)

    def rss_mb(self) -> float:
        return float(self.psutil.memory_info().rss) / MB

    def rss_by_heap_mb(self) -> dict[str, float]:
        """The RSS by where it lies (/proc/PID/smaps): `main_heap` (glibc's main arena, the main thread's), `anonymous`
        (other anonymous mappings: the arenas of other threads, ZeroMQ's I/O thread's among them, and blocks glibc
        mapped apart), `largest_anonymous` (the largest of those, an arena) and `other` (code and files)."""
        found = {"main_heap": 0.0, "anonymous": 0.0, "largest_anonymous": 0.0, "other": 0.0}
        name = ""
        with open(f"/proc/{self.process.pid}/smaps") as mappings:
            for line in mappings:
                fields = line.split()
                if fields and not fields[0].endswith(":"):  # a mapping's first line: its range, ..., its path
                    name = fields[5] if len(fields) > 5 else ""
                elif fields[:1] == ["Rss:"]:
                    mb = int(fields[1]) / 1024
                    kind = "main_heap" if name == "[heap]" else "anonymous" if name == "" else "other"
                    found[kind] += mb
                    if kind == "anonymous":
                        found["largest_anonymous"] = max(found["largest_anonymous"], mb)
        return found

    def stop(self) -> None:
        _end(self.process)
        self._log.close()


class Fleet:
    """A process of fake peers (fleet.py), driven by JSON commands."""

    def __init__(self, address: str, log: Path, workers: int = 0, clients: int = 0, capacity: int = 2,
                 tag: str = "a", links: int | None = None) -> None:  # fmt: skip
        command = [sys.executable, "-m", "scale.fleet", address, "--workers", str(workers), "--clients", str(clients),
                   "--capacity", str(capacity), "--tag", tag]  # fmt: skip
        if links is not None:
            command += ["--links", str(links)]
        self._log: IO[bytes] = open(log, "ab")
        self.process = subprocess.Popen(command, cwd=BENCH_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._log, start_new_session=True, text=True)  # fmt: skip
        self.psutil = psutil.Process(self.process.pid)

    def ask(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the fleet ended before it answered {op!r} (its log: {self._log.name})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            if self.process.poll() is None:
                self.ask("stop")
        _end(self.process, grace=5)
        self._log.close()


def rss_of(pid: int) -> float:
    return float(psutil.Process(pid).memory_info().rss) / MB
