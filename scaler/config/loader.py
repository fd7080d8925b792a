"""Load a component's settings section from the command line, the environment and a TOML file.

For a section dataclass (`scaler.config.sections`) we derive a pydantic-settings model with the same fields,
types, defaults and constraints. Its sources, strongest first:

1. the command line: only what the user typed, passed to the model as init kwargs;
2. `SCALER_<SECTION>_<FIELD>`, e.g. SCALER_SCHEDULER_WORKER_TIMEOUT_SECONDS (section = the command's TOML
   table, or the worker manager type: SCALER_AWS_HPC_JOB_QUEUE);
3. `SCALER_<FIELD>`, e.g. SCALER_LOGGING_LEVEL, for every command that has the setting;
4. the command's section of the `-c/--config` TOML file (`scaler.config.toml_file`);
5. the dataclass defaults.

pydantic-settings merges and validates them; the result goes back into the frozen dataclass, which is all a
runtime process sees (it never imports pydantic). Problems become one `ConfigError` message naming the
setting, where its value came from and what is allowed; the command-line functions print it and exit with 2.
"""

from __future__ import annotations

import argparse
import contextvars
import dataclasses
import difflib
import os
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic
from pydantic import BeforeValidator, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from scaler.config.byte_size import ACCEPTED_FORMS, parse_byte_size
from scaler.config.cli import CONFIG_DEST, RETIRED_DEST, build_parser, flag_label
from scaler.config.commands import Command
from scaler.config.completion import is_completing, offer_completion, worker_manager_completion_parser
from scaler.config.event_loops import event_loop_problem
from scaler.config.fields import BYTE_SIZE, CHOICES, GE, GT, HIDDEN, POSITIONAL
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
    "settings_model",
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


# --- one section from its sources ---------------------------------------------------------------------------


def section_from_sources(
    section_type: type[T],
    *,
    cli_values: Mapping[str, Any] | None = None,
    toml: TomlSection | None = None,
    env_section: str | None = None,
    section_label: str | None = None,
) -> T:
    """Validate command-line values (as typed), the environment and a TOML section into `section_type`.
    Raises ConfigError. `section_label` names the TOML section in "missing setting" messages."""
    model = settings_model(section_type)
    cli_values = dict(cli_values or {})
    inputs = _Inputs(toml_values=dict(toml.values) if toml else {}, env_prefixes=_env_prefixes(env_section))
    token = _INPUTS.set(inputs)
    try:
        settings = model(**cli_values)
    except ValidationError as error:
        explain = _Explainer(section_type, cli_values, inputs.env_prefixes, toml, section_label)
        raise ConfigError("\n".join(explain(detail) for detail in error.errors())) from None
    except SettingsError as error:
        raise ConfigError(str(error.__cause__ or error)) from None
    finally:
        _INPUTS.reset(token)
    return section_type(**settings.model_dump())


def settings_model(section_type: type) -> type[BaseSettings]:
    """The pydantic-settings model of a section dataclass: same fields, types, defaults; metadata `gt`/`ge`
    become constraints, `choices` a case-insensitive choice, `tuple[str, ...]` also takes one string."""
    model = _MODELS.get(section_type)
    if model is None:
        model = _MODELS[section_type] = _derive_model(section_type)
    return model


#: section dataclass -> its derived model (building one costs a few milliseconds).
_MODELS: dict[type, type[BaseSettings]] = {}


def _derive_model(section_type: type) -> type[BaseSettings]:
    hints = typing.get_type_hints(section_type)
    definitions: dict[str, Any] = {
        field.name: (_annotation(field, hints[field.name]), _field_info(field))
        for field in dataclasses.fields(section_type)
    }
    model: type[BaseSettings] = pydantic.create_model(
        f"{section_type.__name__}Settings", __base__=_SectionSettings, __module__=__name__, **definitions
    )
    return model


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """What one load passes to `settings_customise_sources`, which pydantic-settings calls as a classmethod."""

    toml_values: Mapping[str, Any]
    env_prefixes: tuple[str, ...]


_INPUTS: contextvars.ContextVar[_Inputs] = contextvars.ContextVar("scaler_config_inputs")
_NO_INPUTS = _Inputs(toml_values={}, env_prefixes=("SCALER_",))


class _SectionSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", case_sensitive=False)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        inputs = _INPUTS.get(_NO_INPUTS)
        environment = tuple(_EnvironmentSource(settings_cls, env_prefix=prefix) for prefix in inputs.env_prefixes)
        return (init_settings, *environment, _TomlSectionSource(settings_cls, inputs.toml_values))


class _EnvironmentSource(EnvSettingsSource):
    """Environment variables with one prefix. A list setting takes a JSON array or one plain value
    (SCALER_LOGGING_PATHS=/tmp/x.log), where pydantic-settings would insist on JSON."""

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        if isinstance(value, str) and not value.lstrip().startswith("["):
            return value
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError as error:
            variable = f"{self.env_prefix}{field_name}".upper()
            raise ValueError(
                f"{variable} is not a valid JSON array ({error}); give one value or a JSON array"
            ) from None


class _TomlSectionSource(PydanticBaseSettingsSource):
    """The command's section of the TOML file, keys already mapped onto field names by `toml_file`."""

    def __init__(self, settings_cls: type[BaseSettings], values: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._values = dict(values)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


def _annotation(field: dataclasses.Field[Any], hint: Any) -> Any:
    annotated: Any = typing.Annotated  # subscripted with runtime values, which mypy cannot check
    if CHOICES in field.metadata:
        return annotated[hint, BeforeValidator(_choice(field.metadata[CHOICES]))]
    if field.metadata.get(BYTE_SIZE):
        return annotated[hint, BeforeValidator(_byte_size)]
    if typing.get_origin(hint) is tuple:
        return annotated[hint, BeforeValidator(_one_or_many)]
    return hint


def _field_info(field: dataclasses.Field[Any]) -> Any:
    default = ... if field.default is dataclasses.MISSING else field.default
    return Field(default, gt=field.metadata.get(GT), ge=field.metadata.get(GE))


def _choice(choices: Sequence[str]) -> Callable[[Any], Any]:
    canonical = {choice.lower(): choice for choice in choices}

    def validate(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value.lower() not in canonical:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return canonical[value.lower()]

    return validate


def _byte_size(value: Any) -> Any:
    return value if value is None else parse_byte_size(value)


def _one_or_many(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


def _env_prefixes(env_section: str | None) -> tuple[str, ...]:
    if env_section is None:
        return ("SCALER_",)
    return (f"SCALER_{env_section.upper()}_", "SCALER_")


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
    prefixes = " or ".join(f"{prefix}<SETTING>" for prefix in _env_prefixes(env_section))
    example = f"{_env_prefixes(env_section)[0]}{_env_example(section_type)}"
    lines = [
        "precedence: command line > environment > config file > defaults",
        f"environment: {prefixes} (setting in capitals, e.g. {example})",
    ]
    if specs:
        sections = ", then ".join(spec.label for spec in specs)
        lines.append(f"config file: -c FILE reads {sections}; keys are the long flags in snake case")
    return "\n".join(lines)


class _Explainer:
    """Turns one pydantic error into a sentence naming the setting, where its value came from, what is allowed."""

    def __init__(
        self,
        section_type: type,
        cli_values: Mapping[str, Any],
        env_prefixes: Sequence[str],
        toml: TomlSection | None,
        section_label: str | None,
    ) -> None:
        self._fields = {field.name: field for field in dataclasses.fields(section_type)}
        self._hints = typing.get_type_hints(section_type)
        self._cli_values = cli_values
        self._env_prefixes = env_prefixes
        self._toml = toml
        self._section_label = section_label

    def __call__(self, detail: Mapping[str, Any]) -> str:
        location = detail.get("loc") or ("?",)
        name = str(location[0])
        field = self._fields.get(name)
        if field is None:
            return f"{name}: {detail.get('msg')}"
        if detail.get("type") == "missing":
            return self._missing(field)
        where, value = self._origin(field)
        return f"bad value {toml_repr(value)} for {where}: expected {self._expectation(field)}"

    def _missing(self, field: dataclasses.Field[Any]) -> str:
        if field.metadata.get(POSITIONAL):
            ways = [f"as the positional argument {field.name}"]
        else:
            ways = [f"as {flag_label(field)}"]
        if self._toml is not None:
            ways.append(f"as {field.name} in {self._toml.label} of {self._toml.path}")
            if field.name == "scheduler_address":
                ways.append(f"by a [scheduler] section in {self._toml.path} (its address is taken)")
        elif self._section_label is not None:  # a table "[scheduler]", or an entry '[[worker_manager]] entry with ...'
            label = self._section_label
            where = f"the {label}" if "entry" in label else f"the {label} section"
            ways.append(f"as {field.name} in {where} of a -c/--config file")
        ways.append(f"as {self._env_prefixes[0]}{field.name.upper()}")
        return f"missing setting {field.name}: give it {', '.join(ways[:-1])}, or {ways[-1]}"

    def _origin(self, field: dataclasses.Field[Any]) -> tuple[str, Any]:
        if field.name in self._cli_values:
            return flag_label(field), self._cli_values[field.name]
        environment = {key.upper(): value for key, value in os.environ.items()}
        for prefix in self._env_prefixes:
            variable = f"{prefix}{field.name}".upper()
            if variable in environment:
                return variable, environment[variable]
        if self._toml is not None and field.name in self._toml.values:
            return self._toml.where(field.name), self._toml.values[field.name]
        return f"{field.name} (default)", field.default

    def _expectation(self, field: dataclasses.Field[Any]) -> str:
        if CHOICES in field.metadata:
            return f"one of {', '.join(field.metadata[CHOICES])}"
        hint = self._hints[field.name]
        base = next((arg for arg in typing.get_args(hint) if arg is not type(None)), hint)
        if typing.get_origin(base) is tuple:
            return "a list of strings, or one string"
        kind = {bool: "a boolean (true or false)", int: "an integer", float: "a number"}.get(base, "a string")
        if field.metadata.get(BYTE_SIZE):
            kind = "a byte size"
        if GT in field.metadata:
            kind += f" > {field.metadata[GT]:g}"
        if GE in field.metadata:
            kind += f" >= {field.metadata[GE]:g}"
        return f"{kind}: {ACCEPTED_FORMS}" if field.metadata.get(BYTE_SIZE) else kind
