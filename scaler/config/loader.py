"""Load a component's settings section from the command line, the environment and a TOML file.

The command line comes from the section's parser (`scaler.config.cli`), the file's section from
`scaler.config.toml_file`; `scaler.config.section_sources` takes each setting from the strongest source that gives it
(flag > environment > file > default) and checks it. The result is the frozen section dataclass, which is all a runtime
process sees. Problems become one `ConfigError` message naming the setting, where its value came from and what is
allowed; the command-line functions print it and exit with 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from scaler.config.cli import CONFIG_DEST, RETIRED_DEST, build_parser
from scaler.config.commands import Command
from scaler.config.completion import is_completing, offer_completion, worker_manager_completion_parser
from scaler.config.event_loops import event_loop_problem
from scaler.config.fields import HIDDEN, POSITIONAL
from scaler.config.section_sources import env_prefixes, section_from_sources
from scaler.config.sections import (
    GUIConfig,
    LauncherConfig,
    ObjectStorageServerConfig,
    SchedulerConfig,
    StackSecurityConfig,
    retired_settings,
)
from scaler.config.toml_file import (
    ConfigError,
    SectionSpec,
    TomlSection,
    read_section,
    read_toml_file,
    section_from_table,
    toml_repr,
)

if TYPE_CHECKING:
    from scaler.config.manager_sections import WorkerManagerSettings

__all__ = [
    "ConfigError",
    "LauncherFile",
    "build_parser",
    "load_command",
    "load_launcher_file",
    "load_section",
    "load_section_with_extras",
    "load_worker_manager",
    "section_from_sources",
    "worker_manager_toml_sections",
]

T = TypeVar("T")


def load_command(
    command: Command[T],
    argv: Sequence[str] | None,
    extra_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    *,
    name: str | None = None,
    toml_sections: Sequence[str] | None = None,
    description: str | None = None,
) -> tuple[T, argparse.Namespace]:
    """The section of `command` (a row of `commands.COMMANDS`) from `argv`, and the values of the arguments
    `extra_arguments` added. `name`: another name the command runs under (`scaler_ui`), which reads
    `toml_sections` instead, and says `description` in its help. On any problem: one message on stderr, exit code
    2."""
    return load_section_with_extras(
        command.section,
        argv,
        prog=name or command.prog,
        description=command.description if description is None else description,
        toml_sections=command.toml_sections if toml_sections is None else toml_sections,
        env_section=command.environment_section,
        extra_arguments=extra_arguments,
    )


def load_section(
    section_type: type[T],
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str = "",
    toml_sections: Sequence[str],
    env_section: str | None = None,
    extra_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> T:
    """Parse `argv` (None: sys.argv[1:]) and return the validated section.

    `toml_sections`: where `-c FILE` is read, in preference order: table names ("scheduler") or an entry of an
    array of tables ("worker_manager[type=aws_hpc]"). `env_section`: the <SECTION> of the environment
    variables (default: the first table name, or the selector's value). `extra_arguments` may add arguments
    that are not settings; `load_section_with_extras` returns their values. On any problem: one message on
    stderr, exit code 2.
    """
    section, _ = load_section_with_extras(
        section_type,
        argv,
        prog=prog,
        description=description,
        toml_sections=toml_sections,
        env_section=env_section,
        extra_arguments=extra_arguments,
    )
    return section


def load_section_with_extras(
    section_type: type[T],
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str = "",
    toml_sections: Sequence[str],
    env_section: str | None = None,
    extra_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[T, argparse.Namespace]:
    """`load_section`, plus the values of the arguments `extra_arguments` added. Every command that loads a section
    runs it, so an event loop this machine cannot run (`event_loop_problem`) is refused here too."""
    specs = [SectionSpec.parse(spec) for spec in toml_sections]
    env_section = env_section or _default_env_section(specs)
    parser = build_parser(section_type, prog, description, epilog=_epilog(section_type, specs, env_section))
    if extra_arguments is not None:
        extra_arguments(parser)
    offer_completion(parser)
    given = vars(parser.parse_args(argv))
    retired = {name[len(RETIRED_DEST) :]: given.pop(name) for name in list(given) if name.startswith(RETIRED_DEST)}
    field_names = {field.name for field in dataclasses.fields(section_type)}  # type: ignore[arg-type]
    cli_values = {name: value for name, value in given.items() if name in field_names}
    extras = argparse.Namespace(**{k: v for k, v in given.items() if k not in field_names and k != CONFIG_DEST})
    try:
        if CONFIG_DEST in given and not specs:
            raise ConfigError(f"{prog} reads no config file")
        toml = read_section(section_type, given[CONFIG_DEST], specs) if CONFIG_DEST in given else None
        if toml is not None:
            toml = _with_file_scheduler_address(section_type, toml, read_toml_file(toml.path))
        for notice in [*_retired_flag_notices(section_type, retired), *(toml.notices if toml is not None else ())]:
            print(f"{prog}: {notice}", file=sys.stderr)
        section = section_from_sources(
            section_type,
            cli_values=cli_values,
            toml=toml,
            env_section=env_section,
            section_label=specs[0].label if specs else None,
        )
        problem = event_loop_problem(section)  # the command runs this section: refused before it starts
        if problem is not None:
            raise ConfigError(problem)
    except ConfigError as error:
        parser.exit(2, f"{prog}: error: {error}\n")
    return section, extras


def _retired_flag_notices(section_type: type, given: Mapping[str, Any]) -> list[str]:
    """A note for each retired setting given on the command line (`sections.RETIRED_SETTINGS`); ConfigError for a
    value it never accepted."""
    notices = []
    for retired in retired_settings(section_type):
        if retired.name not in given:
            continue
        option = "/".join(retired.option_strings)
        problem = retired.problem(given[retired.name])
        if problem is not None:
            raise ConfigError(f"bad value {given[retired.name]!r} for {option}; {problem}")
        notices.append(f"note: {option} is accepted for compatibility and ignored: {retired.why}")
    return notices


def worker_manager_toml_sections(type_name: str) -> tuple[str, ...]:
    """Where `scaler_worker_manager <type_name> -c FILE` looks, in preference order."""
    from scaler.config.manager_types import MANAGER_TYPES

    return MANAGER_TYPES[type_name].toml_sections


def load_worker_manager(
    argv: Sequence[str] | None,
    *,
    prog: str = "scaler_worker_manager",
    type_name: str | None = None,
) -> WorkerManagerSettings:
    """`scaler_worker_manager <type> [options] [scheduler_address]`: the section of that type (its row of
    `MANAGER_TYPES`; `manager_type_of` tells which). The type is the first argument that is not an option
    (`-c FILE` may come before it); without one, a `-c` file with exactly one [[worker_manager]] entry names it.
    `type_name`: a command for one type (the 1.x adapters)."""
    from scaler.config.manager_types import MANAGER_TYPES
    from scaler.version import __version__

    arguments = list(sys.argv[1:] if argv is None else argv)
    names = list(MANAGER_TYPES)
    width = max(len(name) for name in names)
    types = "\n".join(f"  {name:<{width}}  {MANAGER_TYPES[name].summary}" for name in names)
    parser = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} {{{','.join(names)}}} [options] [scheduler_address]",
        description=f"Start a worker manager of one type. `{prog} TYPE -h` lists the settings of a type.\n\n"
        f"types:\n{types}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    if is_completing():
        offer_completion(worker_manager_completion_parser(prog, names, type_name))
    if type_name is None:
        if arguments[:1] in (["-h"], ["--help"]):
            parser.print_help()
            parser.exit(0)
        if arguments[:1] == ["--version"]:
            print(f"{prog} {__version__}")
            parser.exit(0)
        type_name, arguments = _take_manager_type(arguments, parser, names)
    if type_name not in names:
        close = difflib.get_close_matches(type_name, names, n=1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        parser.error(f"unknown worker manager type {type_name!r}{hint}; choose from: {', '.join(names)}")
    section_type = MANAGER_TYPES[type_name].section
    return load_section(
        section_type,
        arguments,
        prog=prog if prog != "scaler_worker_manager" else f"{prog} {type_name}",
        description=section_type.__doc__ or "",
        toml_sections=worker_manager_toml_sections(type_name),
    )


def _take_manager_type(
    arguments: list[str], parser: argparse.ArgumentParser, names: Sequence[str]
) -> tuple[str, list[str]]:
    """The manager type and the other arguments. The type is the first argument that is neither an option nor
    the file of `-c`/`--config`; without one, the single [[worker_manager]] entry of the `-c` file."""
    config_file: str | None = None
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument in ("-c", "--config") and index + 1 < len(arguments):
            config_file = arguments[index + 1]
            index += 2
            continue
        if argument.startswith("--config="):
            config_file = argument.partition("=")[2]
        elif not argument.startswith("-"):
            return argument, arguments[:index] + arguments[index + 1 :]
        index += 1
    if config_file is not None:
        try:
            entries = read_toml_file(config_file).get("worker_manager", [])
        except ConfigError as error:
            parser.error(str(error))
        entries = entries if isinstance(entries, list) else [entries]
        types = [entry.get("type") for entry in entries if isinstance(entry, dict)]
        if len(types) == 1 and isinstance(types[0], str):
            return types[0], arguments
        parser.error(
            f"{config_file} has {len(types)} [[worker_manager]] entries: name the type, one of: {', '.join(names)}"
        )
    parser.error(f"the worker manager type is required, one of: {', '.join(names)}")


# --- the `scaler FILE` launcher -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LauncherFile:
    """What `scaler FILE` starts: the sections present in the file ([top] and other tools' tables ignored)."""

    object_storage_server: ObjectStorageServerConfig | None
    scheduler: SchedulerConfig | None
    #: one per [[worker_manager]] entry, in file order
    worker_managers: tuple[WorkerManagerSettings, ...]
    gui: GUIConfig | None
    security: StackSecurityConfig | None = None
    #: notes about translated 1.x keys, for stderr
    notices: tuple[str, ...] = ()
    #: [scaler]: how the stack runs (always present: the defaults when the file has no such table)
    launcher: LauncherConfig = dataclasses.field(default_factory=LauncherConfig)


def load_launcher_file(path: str, launcher_flags: Mapping[str, Any] | None = None) -> LauncherFile:
    """Read every section `scaler FILE` starts; environment variables apply as for the single commands.
    `launcher_flags`: the `[scaler]` settings given on the command line (`cli.add_setting_flags`), which override
    the environment and the file. Raises ConfigError (the launcher prints it) when anything is wrong, before
    anything starts."""
    document = read_toml_file(path)
    notices: list[str] = []

    def table(section_type: type[T], name: str, flags: Mapping[str, Any] | None = None) -> T | None:
        toml = None
        if name in document:
            spec = SectionSpec(name)
            found = _find_single(document, path, spec)
            toml = section_from_table(section_type, found, path=path, label=spec.label)
            notices.extend(toml.notices)
        elif flags is None:
            return None
        return section_from_sources(
            section_type, cli_values=flags, toml=toml, env_section=name, section_label=f"[{name}]"
        )

    scheduler = table(SchedulerConfig, "scheduler")
    launcher = LauncherFile(
        object_storage_server=table(ObjectStorageServerConfig, "object_storage_server"),
        scheduler=scheduler,
        worker_managers=_launcher_worker_managers(document, path, scheduler, notices),
        gui=table(GUIConfig, "gui") or table(GUIConfig, "webui"),
        security=table(StackSecurityConfig, "security"),
        notices=tuple(notices),
        launcher=table(LauncherConfig, "scaler", launcher_flags or {}) or LauncherConfig(),
    )
    if not (launcher.object_storage_server or launcher.scheduler or launcher.worker_managers or launcher.gui):
        raise ConfigError(f"{path} has none of [object_storage_server], [scheduler], [[worker_manager]], [gui]")
    return launcher


def _find_single(document: Mapping[str, Any], path: str, spec: SectionSpec) -> Mapping[str, Any]:
    content = document[spec.table]
    if not isinstance(content, dict):
        raise ConfigError(f"{path}: {spec.label} must be a table, not {toml_repr(content)}")
    return content


def _launcher_worker_managers(
    document: Mapping[str, Any], path: str, scheduler: SchedulerConfig | None, notices: list[str]
) -> tuple[WorkerManagerSettings, ...]:
    from scaler.config.manager_types import MANAGER_TYPES

    entries = document.get("worker_manager", [])
    entries = entries if isinstance(entries, list) else [entries]
    managers: list[WorkerManagerSettings] = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: [[worker_manager]] must be an array of tables (or one table)")
        type_name = entry.get("type")
        row = MANAGER_TYPES.get(type_name) if isinstance(type_name, str) else None
        if row is None:
            close = difflib.get_close_matches(type_name, list(MANAGER_TYPES), n=1) if isinstance(type_name, str) else []
            raise ConfigError(
                f"{path}: [[worker_manager]] entry {number} needs type = one of {', '.join(MANAGER_TYPES)}"
                f" (it has {toml_repr(type_name) if type_name is not None else 'none'}"
                + (f'; did you mean "{close[0]}"?)' if close else ")")
            )
        section_type = row.section
        label = f'[[worker_manager]] entry {number} (type = "{type_name}")'
        toml = section_from_table(section_type, entry, path=path, label=label, skip_keys=("type",))
        notices.extend(toml.notices)
        if scheduler is not None:
            toml = _inherit_scheduler_address(toml, scheduler)
        managers.append(section_from_sources(section_type, toml=toml, env_section=type_name, section_label=label))
    ids = [manager.worker_manager_id for manager in managers]
    duplicates = sorted({manager_id for manager_id in ids if ids.count(manager_id) > 1})
    if duplicates:
        raise ConfigError(f"{path}: worker_manager_id must differ between [[worker_manager]] entries: {duplicates}")
    return tuple(managers)


# --- a section that connects to the scheduler named in the same file ------------------------------------


def _with_file_scheduler_address(section_type: type, toml: TomlSection, document: Mapping[str, Any]) -> TomlSection:
    """For `<command> -c FILE`: a section with a `scheduler_address` setting (a worker manager, [cluster],
    [worker]) that does not give one takes the address of the file's [scheduler], as `scaler FILE` does."""
    connects = any(field.name == "scheduler_address" for field in dataclasses.fields(section_type))
    if not connects or "scheduler_address" in toml.values or not isinstance(document.get("scheduler"), dict):
        return toml
    spec = SectionSpec("scheduler")
    table = section_from_table(SchedulerConfig, document["scheduler"], path=toml.path, label=spec.label)
    scheduler = section_from_sources(SchedulerConfig, toml=table, env_section="scheduler", section_label=spec.label)
    return _inherit_scheduler_address(toml, scheduler)


def _inherit_scheduler_address(toml: TomlSection, scheduler: SchedulerConfig) -> TomlSection:
    """The section with `scheduler_address` set to where `scheduler` can be reached on this machine, unless the
    section sets it. It counts as a file value: the command line and the environment still override it."""
    if "scheduler_address" in toml.values:
        return toml
    values = {**toml.values, "scheduler_address": connectable_address(scheduler.bind_address)}
    keys = {**toml.keys, "scheduler_address": "scheduler_address (from [scheduler] bind_address)"}
    return dataclasses.replace(toml, values=values, keys=keys)


def connectable_address(bind_address: str) -> str:
    """An address to connect to for one that is bound: a wildcard host (`tcp://0.0.0.0:8516`, `tcp://*:8516`)
    is this machine's loopback address; anything else is itself. (The same rule as
    `scaler.io.address.Address.connectable`, which this layer may not import.)"""
    scheme, separator, rest = bind_address.partition("://")
    authority, slash, path = rest.partition("/")
    host, colon, port = authority.rpartition(":")
    if not colon:
        host = authority
    if scheme in ("tcp", "tls", "ws", "wss") and separator and host in ("*", "0.0.0.0"):
        return f"{scheme}://127.0.0.1{colon}{port}{slash}{path}"
    return bind_address


# --- the help text's epilog -------------------------------------------------------------------------------


def _env_example(section_type: type) -> str:
    """`LOGGING_LEVEL=DEBUG`, or for a command without that setting (`scaler_top`) one of its own: an example
    the command takes."""
    fields = {field.name: field for field in dataclasses.fields(section_type)}
    if "logging_level" in fields:
        return "LOGGING_LEVEL=DEBUG"
    shown = [
        field
        for field in reversed(fields.values())
        if not field.metadata.get(POSITIONAL) and not field.metadata.get(HIDDEN) and field.default not in (None, "")
    ]
    if not shown:
        return "SETTING=VALUE"
    default = shown[0].default
    value = str(default).lower() if isinstance(default, bool) else str(default)
    return f"{shown[0].name.upper()}={value}"


def _default_env_section(specs: Sequence[SectionSpec]) -> str | None:
    if not specs:
        return None
    return specs[0].selector[1] if specs[0].selector is not None else specs[0].table


def _epilog(section_type: type, specs: Sequence[SectionSpec], env_section: str | None) -> str:
    prefixes = " or ".join(f"{prefix}<SETTING>" for prefix in env_prefixes(env_section))
    example = f"{env_prefixes(env_section)[0]}{_env_example(section_type)}"
    lines = [
        "precedence: command line > environment > config file > defaults",
        f"environment: {prefixes} (setting in capitals, e.g. {example})",
    ]
    if specs:
        sections = ", then ".join(spec.label for spec in specs)
        lines.append(f"config file: -c FILE reads {sections}; keys are the long flags in snake case")
    return "\n".join(lines)
