"""Slurm's commands, found once and run off the event loop (asyncio subprocesses, with a deadline).

A command that fails raises `SlurmError` with the command's own words (its last lines of stderr): the runner logs
them once and retries with its back-off. The commands run in the manager's environment without the `SLURM_*`
variables of a job the manager itself may run in (sbatch would read `SLURM_MEM_PER_CPU` and the like as options),
`SLURM_CONF` kept: it names the cluster.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from dataclasses import dataclass

#: The commands the manager needs, and sacct, which it uses when Slurm keeps accounting.
REQUIRED = ("sbatch", "squeue", "scancel", "sinfo")
OPTIONAL = ("sacct",)
#: How long one command may take: a controller that does not answer makes them wait (MessageTimeout, retries).
COMMAND_TIMEOUT_SECONDS = 60.0


class SlurmError(Exception):
    """A Slurm command failed; the message has its words."""


@dataclass(frozen=True, slots=True)
class SlurmCommands:
    paths: dict[str, str]  #: command name -> its path

    @classmethod
    def find(cls, folder: str = "") -> SlurmCommands:
        """The commands in `folder` (else on PATH); SlurmError naming the missing ones."""
        search = os.path.expanduser(folder) if folder else None
        paths = {name: shutil.which(name, path=search) for name in (*REQUIRED, *OPTIONAL)}
        missing = [name for name in REQUIRED if paths[name] is None]
        if missing:
            where = f"in slurm_commands_folder {folder!r}" if folder else "on PATH"
            raise SlurmError(
                f"Slurm's commands {', '.join(missing)} are not {where}: run the manager where Slurm's client "
                "commands are (a login node), or name their folder with slurm_commands_folder"
            )
        return cls({name: path for name, path in paths.items() if path is not None})

    @property
    def has_sacct(self) -> bool:
        return "sacct" in self.paths

    def argv(self, name: str, *arguments: str) -> list[str]:
        return [self.paths[name], *arguments]

    async def run(self, name: str, *arguments: str, stdin: str | None = None) -> str:
        """Run a command off the event loop; its stdout, or SlurmError with its words."""
        argv = self.argv(name, *arguments)
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=command_environment(),
        )
        try:
            out, err = await asyncio.wait_for(
                process.communicate(stdin.encode() if stdin is not None else None), COMMAND_TIMEOUT_SECONDS
            )
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
            raise SlurmError(f"{name} did not answer within {COMMAND_TIMEOUT_SECONDS:g} s") from None
        except asyncio.CancelledError:
            if process.returncode is None:
                process.kill()
            raise
        return _result(name, process.returncode, out, err)

    def run_now(self, name: str, *arguments: str, stdin: str | None = None) -> str:
        """The same, blocking (before the manager's loop runs: the start checks, the dry run)."""
        try:
            done = subprocess.run(
                self.argv(name, *arguments), input=stdin.encode() if stdin is not None else None,
                capture_output=True, timeout=COMMAND_TIMEOUT_SECONDS, env=command_environment(), check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{name} did not answer within {COMMAND_TIMEOUT_SECONDS:g} s") from None
        except OSError as error:
            raise SlurmError(f"{name} could not run: {error}") from None
        return _result(name, done.returncode, done.stdout, done.stderr)


def command_environment() -> dict[str, str]:
    """The manager's environment without an enclosing job's SLURM_* variables (SLURM_CONF kept)."""
    return {key: value for key, value in os.environ.items() if not key.startswith("SLURM_") or key == "SLURM_CONF"}


def words_of(text: str, lines: int = 3) -> str:
    """The last lines a command wrote, in one line."""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " / ".join(kept[-lines:])


def _result(name: str, code: int | None, out: bytes, err: bytes) -> str:
    if code != 0:
        said = words_of(err.decode(errors="replace")) or words_of(out.decode(errors="replace")) or "nothing"
        raise SlurmError(f"{name} failed (exit {code}): {said}")
    return out.decode(errors="replace")
