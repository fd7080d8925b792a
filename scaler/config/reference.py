"""What follows in files from the settings' declarations: docs/settings.md and `ComboSettings`.

`python -m scaler.config.reference` rewrites both from `scaler.config.sections` (`--check`: exit 1 when either is
out of date, naming it); tests/unit/test_config_declarations.py checks them. The flags, TOML keys, environment
variables and validation need no file: the loader derives them when a command runs.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from scaler.config.cli import option_strings, show_default
from scaler.config.combo import COMBO_SECTIONS, combo_parameters
from scaler.config.commands import COMMANDS, LAUNCHER_TABLES
from scaler.config.fields import HELP, HIDDEN, POSITIONAL, SHOWN_DEFAULT
from scaler.config.manager_sections import CloudUnitSettings, WorkerManagerSettings
from scaler.config.manager_types import MANAGER_TYPES
from scaler.config.sections import CurveClientSettings, CurveServerSettings, LoggingSettings, WorkerSettings

REPOSITORY = Path(__file__).resolve().parents[2]
SETTINGS_PAGE = REPOSITORY / "docs" / "settings.md"
COMBO_SETTINGS_MODULE = Path(__file__).resolve().parent / "combo_settings.py"

#: The tables of `scaler FILE` whose settings are also its flags (scaler/entry_points/launcher.py adds them with
#: `cli.add_setting_flags`); the others (`[security]`) are keys of the file only.
LAUNCHER_FLAG_TABLES = frozenset({"scaler"})

#: Settings several sections share, listed once each (as `-h` groups them), in this order.
SHARED_GROUPS: tuple[tuple[type, str], ...] = (
    (LoggingSettings, "Logging (every command that logs)"),
    (CurveServerSettings, "Keys of a server (scaler_scheduler, scaler_object_storage_server)"),
    (CurveClientSettings, "Keys of a side that connects (workers, worker managers, scaler_top, scaler_gui)"),
    (WorkerSettings, "Workers (scaler_worker, scaler_cluster, every worker manager: given to its workers)"),
    (WorkerManagerSettings, "Worker managers (every `scaler_worker_manager` type)"),
    (CloudUnitSettings, "Cloud units (`aws_raw_ecs`, `orb_aws_ec2`)"),
)


@dataclasses.dataclass(frozen=True)
class _Table:
    title: str
    section: type
    env_section: str  #: "SCHEDULER", or "<SECTION>" for a shared group
    fields: tuple[dataclasses.Field[Any], ...]
    note: str = ""
    has_flags: bool = True  #: False: a section of the file only, which no flag sets


def settings_page() -> str:
    """docs/settings.md."""
    lines = [
        "# Every setting",
        "",
        "<!-- Generated from scaler/config/sections.py and manager_sections.py by `python -m scaler.config.reference`; "
        "do not edit. -->",
        "",
        "One row per setting, from its declaration in `scaler/config/sections.py` (the worker managers' in "
        "`manager_sections.py`): its TOML key (the long flag in "
        "snake case), its flags, its environment variable and its default. Where the settings come from and in "
        "which order, how TOML sections are found and how values are written: [configuration.md](configuration.md). "
        "In the environment column, `[SCHEDULER_]` means both `SCALER_SCHEDULER_...` (this command only) and "
        "`SCALER_...` (every command with the setting); `<SECTION>` is the command's section (the worker manager "
        "type for `scaler_worker_manager`).",
        "",
    ]
    for table in _tables():
        lines += [f"## {table.title}", ""]
        if table.note:
            lines += [table.note, ""]
        lines += ["| TOML key | flags | environment | default | meaning |", "|---|---|---|---|---|"]
        lines += [_row(field, table.env_section, table.has_flags) for field in table.fields]
        lines.append("")
    lines += _combo_lines()
    return "\n".join(lines)


def _tables() -> Iterator[_Table]:
    shared = {group for group, _ in SHARED_GROUPS}
    for command in COMMANDS.values():
        sections = ", ".join(f"`[{table}]`" for table in command.toml_sections)
        yield _Table(
            f"`{command.prog}` ({sections})",
            command.section,
            command.environment_section.upper(),
            _own_fields(command.section, shared),
            _shared_note(command.section),
        )
    for row in MANAGER_TYPES.values():
        yield _Table(
            f'`scaler_worker_manager {row.name}` (`[[worker_manager]]` with `type = "{row.name}"`)',
            row.section,
            row.name.upper(),
            _own_fields(row.section, shared),
            _shared_note(row.section),
        )
    for table_name, section in LAUNCHER_TABLES.items():
        has_flags = table_name in LAUNCHER_FLAG_TABLES
        note = "" if has_flags else (
            f"No flags: these are keys of the file's `[{table_name}]` section, which the environment variables "
            "override when the file has it."
        )  # fmt: skip
        yield _Table(f"`scaler FILE`: `[{table_name}]`", section, table_name.upper(), _own_fields(section, shared),
                     note, has_flags)  # fmt: skip
    for group, title in SHARED_GROUPS:
        yield _Table(title, group, "<SECTION>", tuple(_declared_by(group)))


def _own_fields(section: type, shared: set[type]) -> tuple[dataclasses.Field[Any], ...]:
    """The fields a section declares itself (or overrides), not those of a shared group."""
    return tuple(field for field in _visible(section) if _declaring_class(section, field.name) not in shared)


def _declared_by(group: type) -> Iterator[dataclasses.Field[Any]]:
    for field in _visible(group):
        if _declaring_class(group, field.name) is group:
            yield field


def _visible(section: type) -> Iterator[dataclasses.Field[Any]]:
    for field in dataclasses.fields(section):
        if not field.metadata.get(HIDDEN):
            yield field


def _shared_note(section: type) -> str:
    groups = [title.partition(" (")[0].lower() for group, title in SHARED_GROUPS if issubclass(section, group)]
    return f"Also the settings of: {', '.join(groups)}." if groups else ""


def _declaring_class(section: type, name: str) -> type:
    return next(cls for cls in section.__mro__ if name in inspect.get_annotations(cls))


def _row(field: dataclasses.Field[Any], env_section: str, has_flags: bool = True) -> str:
    if not has_flags:
        flags = "none"
    elif field.metadata.get(POSITIONAL):
        flags = "positional"
    else:
        flags = ", ".join(f"`{flag}`" for flag in option_strings(field))
    environment = f"`SCALER_[{env_section}_]{field.name.upper()}`"
    if field.default is dataclasses.MISSING:
        default = "required"
    elif SHOWN_DEFAULT in field.metadata:
        default = str(field.metadata[SHOWN_DEFAULT])
    else:
        default = f"`{show_default(field, field.default)}`"
    meaning = " ".join(str(field.metadata.get(HELP, "")).split()).replace("|", "\\|")
    return f"| `{field.name}` | {flags} | {environment} | {default} | {meaning} |"


def _combo_lines() -> list[str]:
    sections = ", ".join(f"`{section.__name__}`" for section in COMBO_SECTIONS)
    lines = [
        "## `SchedulerClusterCombo` keywords",
        "",
        f"The settings of its sections ({sections}) that `SchedulerClusterCombo(...)` takes as keywords, besides "
        "its own arguments (`n_workers`, `address`, `object_storage_address`, `monitor_address`, "
        "`per_worker_capabilities`, `scaler_policy`, `secure`, `insecure`, `dashboard`, ...).",
        "",
        "| keyword | sets | default |",
        "|---|---|---|",
    ]
    for name, parameter in combo_parameters().items():
        targets = ", ".join(f"`{section.__name__}.{field}`" for section, field in parameter.targets)
        field = next(f for f in dataclasses.fields(parameter.targets[0][0]) if f.name == parameter.targets[0][1])
        lines.append(f"| `{name}` | {targets} | `{show_default(field, parameter.default)}` |")
    lines.append("")
    return lines


def combo_settings_module() -> str:
    """scaler/config/combo_settings.py: the combo's keywords as a TypedDict, for mypy."""
    lines = [
        '"""The settings `SchedulerClusterCombo` takes as keywords (`**settings: Unpack[ComboSettings]`).',
        "",
        "Generated from the declarations (`combo=` in scaler/config/sections.py) by",
        "`python -m scaler.config.reference`; do not edit. The defaults and the sections each keyword sets:",
        "`scaler.config.combo`, docs/settings.md.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import TypedDict",
        "",
        "",
        "class ComboSettings(TypedDict, total=False):",
    ]
    for name, parameter in combo_parameters().items():
        lines.append(f"    {name}: {parameter.annotation}  #: {_short(parameter.help)}")
    return "\n".join(lines) + "\n"


def _short(help_text: str, width: int = 70) -> str:
    text = " ".join(help_text.split())
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def generated_files() -> dict[Path, str]:
    return {SETTINGS_PAGE: settings_page(), COMBO_SETTINGS_MODULE: combo_settings_module()}


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not (REPOSITORY / "pyproject.toml").is_file():  # an installed package: its docs/ is not where it writes
        print(
            "python -m scaler.config.reference: this scaler is installed, not a clone: the files it writes "
            "(docs/settings.md, scaler/config/combo_settings.py) belong to the repository; run it in a clone",
            file=sys.stderr,
        )
        return 2
    stale = [path for path, text in generated_files().items() if not path.exists() or path.read_text() != text]
    if "--check" in arguments:
        for path in stale:
            print(
                f"{path.relative_to(REPOSITORY)} is out of date: run python -m scaler.config.reference", file=sys.stderr
            )
        return 1 if stale else 0
    for path, text in generated_files().items():
        if path in stale:
            path.write_text(text)
            print(f"wrote {path.relative_to(REPOSITORY)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
