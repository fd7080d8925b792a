"""A scaler stack across a rig's hosts, started with its ordinary commands: the object storage server and the
scheduler on one host, worker pools (`scaler_cluster`) on others; clients run as scripts on a host of their own
(`run_script`), so every byte between them crosses the rig's links.

The servers use the user's keys (the session's, seen by every host); the other hosts get their pair as a cloud unit
does, in the key text variables (workers the workers' pair, clients the client pair): a connection file names a
process of its own host, so it does not serve another host's processes.

    stack = RigStack.start(rig, storage="storage", workers={"w1": 2, "w2": 2})
    answer = stack.run_script("client", CLIENT_CODE, "--size", "100000000")  # the JSON its last line printed
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaler.security.curve import SECRET_KEY_TEXT_VARIABLE, SERVER_KEY_TEXT_VARIABLE
from scaler.security.key_folder import user_keys
from tests.rig.rig import BIN_DIR, Host, Rig, RigProcess

SCHEDULER_PORT = 2345
STORAGE_PORT = 2346
MONITOR_PORT = 2347
#: How long a stack may take to come up on a loaded 2-core machine (interpreters and imports on every host).
START_SECONDS = 120.0

_WAIT_FOR_WORKERS = """
import sys, time
from scaler.monitor.feed import FeedReader
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC

address, wanted, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
reader = FeedReader(address, topics=(STATUS_TOPIC,))
deadline, seen = time.monotonic() + seconds, None
while time.monotonic() < deadline:
    message = reader.receive(0.1)
    if isinstance(message, m.StatusSnapshot):
        seen = len(message.workers)
        if seen >= wanted:
            break
reader.close()
print(seen)
sys.exit(0 if seen is not None and seen >= wanted else 1)
"""


@dataclass
class RigStack:
    """The stack's addresses (on the storage host) and processes."""

    rig: Rig
    storage_host: Host
    processes: list[RigProcess] = field(default_factory=list)
    #: where the stack's commands are (this environment's by default; a benchmark's venv of its own)
    bin_dir: Path = BIN_DIR

    @property
    def scheduler_address(self) -> str:
        return f"tcp://{self.storage_host.address}:{SCHEDULER_PORT}"

    @property
    def storage_address(self) -> str:
        return f"tcp://{self.storage_host.address}:{STORAGE_PORT}"

    @property
    def monitor_address(self) -> str:
        return f"tcp://{self.storage_host.address}:{MONITOR_PORT}"

    @classmethod
    def start(
        cls,
        rig: Rig,
        storage: str,
        workers: dict[str, int],
        scheduler_args: tuple[str, ...] = (),
        worker_args: tuple[str, ...] = (),
        bin_dir: Path = BIN_DIR,
        storage_args: tuple[str, ...] = (),
    ) -> RigStack:
        """Storage and scheduler on `storage`, `workers[host]` workers on each worker host (the commands of
        `bin_dir`); returns once every worker has registered."""
        stack = cls(rig, rig.host(storage), bin_dir=bin_dir)
        host = stack.storage_host
        stack.processes.append(
            host.start(
                stack.command("scaler_object_storage_server"), stack.storage_address, "-ll", "INFO", *storage_args
            )
        )
        stack.processes.append(
            host.start(
                stack.command("scaler_scheduler"), stack.scheduler_address, "-osa", stack.storage_address, "-ll",
                "INFO", *scheduler_args,
            )
        )  # fmt: skip
        for name, count in workers.items():
            stack.add_workers(name, count, *worker_args)
        stack.wait_for_workers(sum(workers.values()))
        return stack

    def add_workers(self, host: str, count: int, *args: str) -> RigProcess:
        process = self.rig.host(host).start(
            self.command("scaler_cluster"), "-n", str(count), self.scheduler_address, "-his", "0.5", "-ll", "INFO",
            *args, env=key_variables("workers"),
        )  # fmt: skip
        self.processes.append(process)
        return process

    def command(self, name: str) -> str:
        """A command of the stack's environment."""
        return str(self.bin_dir / name)

    def wait_for_workers(self, count: int, seconds: float = START_SECONDS) -> None:
        probe = self.storage_host.run(self.command("python"), "-c", _WAIT_FOR_WORKERS, self.monitor_address,
                                      str(count), str(seconds), timeout_seconds=seconds + 30)  # fmt: skip
        if probe.returncode != 0:
            raise AssertionError(
                f"{count} workers did not register within {seconds:g} s (seen: {probe.stdout.strip() or 'none'}; "
                f"{probe.stderr.strip()[-2000:]}); {self.logs()}"
            )

    def run_script(self, host: str, code: str, *args: str, timeout_seconds: float = 300.0, pair: str = "client") -> Any:
        """Run a client script on `host` with the scheduler's address as its first argument (and the user's `pair` of
        keys in the key text variables); returns what its last line of output says (JSON). Fails with its output and
        the stack's logs when it fails."""
        script = self.rig.workdir / f"script-{len(list(self.rig.workdir.glob('script-*.py')))}.py"
        script.write_text(code)
        done = self.rig.host(host).run(
            self.command("python"), str(script), self.scheduler_address, *args, timeout_seconds=timeout_seconds,
            env=key_variables(pair),
        )  # fmt: skip
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            raise AssertionError(
                f"the script on {host} failed ({done.returncode}): {done.stdout[-3000:]}\n{done.stderr[-6000:]}\n"
                f"{self.logs()}"
            )
        return json.loads(lines[-1])

    def logs(self, characters: int = 2500) -> str:
        """The end of every stack process's log, for a failure message."""
        return "\n".join(
            f"--- {process.host.name} {process.name} ({'running' if process.is_running() else 'exited'}):\n"
            f"{process.log_text()[-characters:]}"
            for process in self.processes
        )

    def stop(self, seconds: float = 20.0) -> None:
        """Every process asked to stop at once (SIGTERM), killed past `seconds`."""
        for process in self.processes:
            if process.is_running():
                process.signal(signal.SIGTERM)
        deadline = time.monotonic() + seconds
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(max(0.0, deadline - time.monotonic()))
            if process.is_running():
                process.stop(0.0)


def key_variables(pair: str) -> dict[str, str]:
    """The key text variables of a connecting side with the user's `pair` ("client", "workers")."""
    keys = user_keys()
    return {
        SECRET_KEY_TEXT_VARIABLE: Path(keys.path(f"{pair}.key_secret")).read_text(),
        SERVER_KEY_TEXT_VARIABLE: Path(keys.path("server.key")).read_text(),
    }
