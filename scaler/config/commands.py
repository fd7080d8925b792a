"""The commands that read a settings section: one row each (`COMMANDS`), with the TOML tables they read.

A command's row gives its section (whose fields are its flags, TOML keys and environment variables), the tables
`-c FILE` reads, in preference order, and the <SECTION> of its `SCALER_<SECTION>_<SETTING>` variables. The entry
points load their settings through it (`scaler.config.loader.load_command`); the worker manager types have their
own rows (`manager_types.MANAGER_TYPES`); the tables a file may hold (`known_tables`) and docs/settings.md are
derived from both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from scaler.config.sections import (
    ClusterConfig,
    GUIConfig,
    LauncherConfig,
    ObjectStorageServerConfig,
    SchedulerConfig,
    StackSecurityConfig,
    TopConfig,
    WorkerConfig,
)

S = TypeVar("S")


@dataclass(frozen=True)
class Command(Generic[S]):
    prog: str  #: the console script
    section: type[S]  #: its settings section
    description: str  #: the first lines of `-h`
    #: where `-c FILE` looks, in preference order: table names, or an entry of an array of tables
    #: ("worker_manager[type=aws_hpc]")
    toml_sections: tuple[str, ...]
    #: the <SECTION> of its environment variables (default: the first table's name)
    env_section: str | None = None

    @property
    def environment_section(self) -> str:
        return self.env_section or self.toml_sections[0].partition("[")[0]


SCHEDULER = Command(
    "scaler_scheduler", SchedulerConfig,
    "Run the scheduler: clients, workers and worker managers connect to its address.", ("scheduler",),
)  # fmt: skip
OBJECT_STORAGE_SERVER = Command(
    "scaler_object_storage_server", ObjectStorageServerConfig,
    "Run the object storage server: it holds task inputs and results.", ("object_storage_server",),
)  # fmt: skip
CLUSTER = Command(
    "scaler_cluster", ClusterConfig, "Start a fixed pool of workers on this machine, connected to a scheduler.",
    ("cluster",),
)  # fmt: skip
WORKER = Command("scaler_worker", WorkerConfig, "Run one worker connected to a scheduler.", ("worker",))
TOP = Command(
    "scaler_top", TopConfig,
    "Watch a scheduler: its tasks, messages and workers, live. The scheduler logs its monitor address at "
    "start (its port + 2 by default). Sort keys are shown on screen; q or Ctrl-C quits.", ("top",),
)  # fmt: skip
GUI = Command(
    "scaler_gui", GUIConfig,
    "Serve a live web dashboard of a scheduler (page at /, Prometheus metrics at /metrics). It listens on "
    "127.0.0.1 only; to reach it from other machines give a public host (--gui-address 0.0.0.0:50001) and "
    "protect it: anyone who reaches it sees the cluster's workers, clients and tasks.",
    ("gui", "webui"),
)  # fmt: skip

#: Every command of one section, by its console script (the worker manager types: `MANAGER_TYPES`).
COMMANDS: dict[str, Command[Any]] = {
    command.prog: command for command in (SCHEDULER, OBJECT_STORAGE_SERVER, CLUSTER, WORKER, TOP, GUI)
}

#: `scaler FILE`'s own tables (its other tables are the commands' sections).
LAUNCHER_TABLES: dict[str, type] = {"scaler": LauncherConfig, "security": StackSecurityConfig}
#: Tables of 1.x that no command reads any more: known, so that a file with one gets the message of the command
#: that would have read it ("has no ... for this command; its sections: ...") rather than "unknown section".
RETIRED_TABLES = frozenset({"fixed_native_worker_adapter"})


def known_tables() -> frozenset[str]:
    """Every table some command or the launcher reads (a file's other tables are refused as typos)."""
    from scaler.config.manager_types import MANAGER_TYPES

    tables = {table.partition("[")[0] for command in COMMANDS.values() for table in command.toml_sections}
    for row in MANAGER_TYPES.values():
        tables.update(table.partition("[")[0] for table in row.toml_sections)
    return frozenset(tables | set(LAUNCHER_TABLES) | RETIRED_TABLES)
