"""The command line of a settings section, generated from its fields: spellings, help text and defaults.

The parser only collects what the user typed (every default is `argparse.SUPPRESS`), as strings;
`scaler.config.loader` validates them together with the environment and the TOML file. So a value in the file
is never overridden by a parser default, and a bad value gets the same message whichever source it came from.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Sequence
from typing import Any

from scaler.config.byte_size import format_byte_size
from scaler.config.fields import ALIASES, BOOLEAN_WORDS, BYTE_SIZE, CHOICES, HELP, HIDDEN, POSITIONAL, SHORT
from scaler.config.sections import retired_settings
from scaler.version import __version__

#: Namespace attribute of -c/--config.
CONFIG_DEST = "config"
#: Namespace attributes of the retired settings (`sections.RETIRED_SETTINGS`) start with this.
RETIRED_DEST = "retired:"

#: Argument groups of `-h`, for settings declared by these shared bases (by name: a command that manages no worker
#: does not import `manager_sections`); a section's own settings come first.
_GROUP_TITLES: dict[str, str] = {
    "WorkerManagerSettings": "worker manager settings",
    "WorkerSettings": "worker settings (given to every worker)",
    "LoggingSettings": "logging settings",
}


def build_parser(
    section_type: type, prog: str, description: str = "", *, epilog: str | None = None
) -> argparse.ArgumentParser:
    """An argparse parser for `section_type`: `--field-name`, every `short` and `aliases` spelling, the
    positional field as an optional positional, `-c/--config FILE`. Two fields claiming one spelling raise
    ValueError here, when the parser is built, not when a user trips over it."""
    parser = SettingsParser(
        prog=prog,
        description=description,
        epilog=epilog,
        formatter_class=_HelpFormatter,
    )
    claimed: dict[str, str] = {"-h": "help", "--help": "help"}
    _claim(claimed, ("-c", "--config"), CONFIG_DEST, section_type)
    parser.add_argument(
        "-c",
        "--config",
        dest=CONFIG_DEST,
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="TOML file to read settings from (its sections are listed below)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    hints = typing.get_type_hints(section_type)
    positional = positional_field(section_type)
    groups = _argument_groups(parser, section_type, prog)
    for field in dataclasses.fields(section_type):
        annotation = hints[field.name]
        if field is positional:
            parser.add_argument(
                field.name,
                nargs="?",
                default=argparse.SUPPRESS,
                help=_help(field, "required: here, in the config file or in the environment"),
            )
            continue
        spellings = option_strings(field)
        _claim(claimed, spellings, field.name, section_type)
        group = groups[_declaring_class(section_type, field.name)]
        group.add_argument(*spellings, dest=field.name, default=argparse.SUPPRESS, **_argument_kind(field, annotation))
    for retired in retired_settings(section_type):  # accepted, not listed: the loader notes and drops them
        _claim(claimed, retired.option_strings, retired.name, section_type)
        kind: dict[str, Any] = {"action": _BooleanAction, "nargs": "?"} if retired.is_flag else {}
        parser.add_argument(*retired.option_strings, dest=RETIRED_DEST + retired.name, default=argparse.SUPPRESS,
                            help=argparse.SUPPRESS, **kind)  # fmt: skip
    for action in parser._actions:
        if isinstance(action, (_BooleanAction, _ListAction)) and positional is not None:
            action.positional_dest = positional.name
    return parser


#: Flags of earlier releases that this version does not take, with what to use instead (docs/configuration.md, "Not
#: supported"; the 1.x spellings it does take are aliases of their settings).
UNSUPPORTED_FLAGS: dict[tuple[str, ...], str] = {
    ("-wn", "--worker-names"): "scaler 1.x's worker names are not supported: a worker is named by its --worker-type "
    "and an id of its own",
    ("-la", "--log-hub-address"): "scaler 1.x's log hub is not supported: each process logs to its own "
    "-lp/--logging-paths",
    ("-ap", "--allocate-policy"): "scaler 1.12's flag is not supported: give -pc/--policy-content "
    '"allocate=even_load; scaling=vanilla" (or allocate_policy = "even" in the [scheduler] section of a -c/--config '
    "file)",
    ("-scs", "--scaling-controller-strategy"): "scaler 1.12's flag is not supported: give the scaling= item of "
    '-pc/--policy-content, e.g. "allocate=capability; scaling=vanilla" (`scaler --docs scaling`)',
    ("-awu", "--adapter-webhook-urls"): "scaler 1.12's flag is not supported: worker managers connect to the "
    "scheduler themselves (scaler_worker_manager TYPE SCHEDULER_ADDRESS)",
    ("-qs", "--per-worker-queue-size"): "scaler 1.9's flag is not supported: give -wtqs/--per-worker-task-queue-size",
}

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


class SettingsParser(argparse.ArgumentParser):
    """An ArgumentParser whose refusal of an unknown flag names the flag and the closest flag the command takes
    (`--num-worker` -> `--num-of-workers`, `--policy_content` -> `--policy-content`), or what replaced a flag of
    an earlier release, instead of argparse's "unrecognized arguments" (which, once a flag is unknown, may also
    list a value the positional argument took). A flag is taken only as written in full: an abbreviation that
    argparse would complete (`--exa` for `--example`) is refused in the same way, as a later flag could make it
    ambiguous."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(**kwargs)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(unrecognized_message(self, extras))
        return parsed


def unrecognized_message(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """What is wrong with the arguments `parser` did not take: each unknown flag with the flag meant, or else the
    extra arguments themselves."""
    flags = [token for token in extras if token.startswith("-") and not _NEGATIVE_NUMBER.match(token)]
    listed = f"`{parser.prog} -h` lists the flags it takes"
    if not flags:
        return f"unrecognized arguments: {' '.join(extras)} ({listed})"
    return "; ".join(_unknown_flag(parser, flag.split("=", 1)[0]) for flag in flags) + f" ({listed})"


def _unknown_flag(parser: argparse.ArgumentParser, flag: str) -> str:
    for spellings, instead in UNSUPPORTED_FLAGS.items():
        if flag in spellings:
            return f"unknown flag {flag}: {instead}"
    listed = {
        spelling: action
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for spelling in action.option_strings
    }
    hyphenated = flag.replace("_", "-") if flag.startswith("--") else flag
    if hyphenated in listed:
        return f"unknown flag {flag}: flags are spelled with hyphens, {hyphenated}"
    longs = [spelling for spelling in listed if spelling.startswith("--")]
    prefixed = [spelling for spelling in longs if spelling.startswith(hyphenated)] if len(hyphenated) > 3 else []
    candidates = longs if flag.startswith("--") else list(listed)
    close = (
        prefixed[:1]
        or _ending_in(hyphenated, longs)
        or difflib.get_close_matches(hyphenated, candidates, n=1, cutoff=0.7)
    )
    if not close:
        return f"unknown flag {flag}"
    shorts = [spelling for spelling in listed[close[0]].option_strings if not spelling.startswith("--")]
    return f"unknown flag {flag} (did you mean {'/'.join([*shorts[:1], close[0]])}?)"


def _ending_in(flag: str, longs: Sequence[str]) -> list[str]:
    """The one long flag whose last words are the words of `flag` (`--workers`: `--num-of-workers`, which the
    spelling alone puts farther than `--worker-type`); nothing when several end so."""
    words = flag.lstrip("-").split("-")
    ending = [spelling for spelling in longs if spelling.lstrip("-").split("-")[-len(words) :] == words]
    return ending if len(ending) == 1 else []


def add_setting_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, section_type: type) -> None:
    """`section_type`'s settings as flags of a parser built elsewhere (`scaler FILE`'s `[scaler]` settings), with
    the spellings, help and kinds `build_parser` gives them; a flag not given leaves no attribute, and values stay
    as typed (the loader validates them with the other sources)."""
    hints = typing.get_type_hints(section_type)
    for field in dataclasses.fields(section_type):
        if field.metadata.get(POSITIONAL):
            raise ValueError(f"{section_type.__name__}.{field.name}: a positional setting needs build_parser")
        kind = _argument_kind(field, hints[field.name])
        parser.add_argument(*option_strings(field), dest=field.name, default=argparse.SUPPRESS, **kind)


def positional_field(section_type: type) -> dataclasses.Field[Any] | None:
    """The field given as the command's positional argument, if any (at most one)."""
    positionals = [field for field in dataclasses.fields(section_type) if field.metadata.get(POSITIONAL)]
    if len(positionals) > 1:
        raise ValueError(f"{section_type.__name__}: several positional settings {[f.name for f in positionals]}")
    return positionals[0] if positionals else None


def option_strings(field: dataclasses.Field[Any]) -> tuple[str, ...]:
    """Short spellings first (as -h shows them), then `--field-name`, then the aliases."""
    longs = [field.name, *field.metadata.get(ALIASES, ())]
    return (*field.metadata.get(SHORT, ()), *(f"--{name.replace('_', '-')}" for name in longs))


def flag_label(field: dataclasses.Field[Any]) -> str:
    """How messages name a setting given on the command line."""
    if field.metadata.get(POSITIONAL):
        return f"positional argument {field.name}"
    return "/".join(option_strings(field)[: 1 + len(field.metadata.get(SHORT, ()))])


class _BooleanAction(argparse.Action):
    """`--flag` alone means true; `--flag WORD` and `--flag=WORD` take a word of BOOLEAN_WORDS (`-p False`).

    argparse gives an optional value the next token whatever it is, so in `-p tcp://host:port` the flag would
    swallow the address. A token that is not a boolean word but looks like an address (has "://") is
    therefore the positional argument, when that has not been given yet.
    """

    positional_dest: str | None = None

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if values is None:
            setattr(namespace, self.dest, True)
            return
        assert isinstance(values, str)
        if values.lower() in BOOLEAN_WORDS:
            setattr(namespace, self.dest, values)
            return
        if "://" in values and self.positional_dest is not None and not hasattr(namespace, self.positional_dest):
            setattr(namespace, self.dest, True)
            setattr(namespace, self.positional_dest, values)
            return
        raise argparse.ArgumentError(self, f"expected a boolean (true/false, yes/no, 1/0), got {values!r}")


class _ListAction(argparse.Action):
    """A list setting (`-lp /dev/stdout /tmp/x.log`). argparse gives it every following token, so in
    `-lp /tmp/x.log tcp://host:port` a last token that looks like an address ("://") and a positional argument
    not given yet make that token the positional argument, as for `_BooleanAction`."""

    positional_dest: str | None = None

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        items = [values] if isinstance(values, str) else list(values or ())
        dest = self.positional_dest
        if len(items) > 1 and "://" in items[-1] and dest is not None and not hasattr(namespace, dest):
            setattr(namespace, dest, items.pop())
        setattr(namespace, self.dest, items)


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Wider columns, each option's spellings with its value name once (`-wt, --worker-timeout-seconds SECONDS`),
    and no line breaks at hyphens."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=44, width=120)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        value = self._format_args(action, self._get_default_metavar_for_optional(action))
        return f"{', '.join(action.option_strings)} {value}"

    def _split_lines(self, text: str, width: int) -> list[str]:
        # Never break inside a value such as "scaler-task-definition" or a flag.
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _argument_kind(field: dataclasses.Field[Any], annotation: Any) -> dict[str, Any]:
    kind: dict[str, Any] = {"help": _help(field, _default_note(field))}
    if field.metadata.get(HIDDEN):
        kind["help"] = argparse.SUPPRESS
    base = _without_none(annotation)
    if base is bool:
        kind.update(action=_BooleanAction, nargs="?", metavar="BOOL")
    elif typing.get_origin(base) is tuple:
        kind.update(action=_ListAction, nargs="+", metavar=_metavar(field.name, str))
    elif CHOICES in field.metadata:
        kind["metavar"] = "{" + ",".join(field.metadata[CHOICES]) + "}"
    elif field.metadata.get(BYTE_SIZE):
        kind["metavar"] = "SIZE"
    else:
        kind["metavar"] = _metavar(field.name, base)
    return kind


def _help(field: dataclasses.Field[Any], note: str | None) -> str:
    text = str(field.metadata.get(HELP, ""))
    return (f"{text} ({note})" if note else text).replace("%", "%%")


def _default_note(field: dataclasses.Field[Any]) -> str | None:
    """ "default: 60", "required"; nothing when the help text says the default itself ("(default: secure, ...)"),
    whatever the default's value: a second note would state the stored value ("false", '""') beside the meaning."""
    if field.default is dataclasses.MISSING:
        return "required"
    if "default" in str(field.metadata.get(HELP, "")):
        return None
    return f"default: {show_default(field, field.default)}"


def show_default(field: dataclasses.Field[Any], default: Any) -> str:
    """A default of `field` as `-h` and docs/settings.md write it."""
    if field.metadata.get(BYTE_SIZE) and isinstance(default, int):
        return format_byte_size(default).replace(" ", "")
    return _show_default(default)


def _show_default(default: Any) -> str:
    if default is None:
        return "none"
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, tuple):
        return " ".join(str(item) for item in default) if default else "none"
    if default == "":
        return '""'
    return str(default)


def _metavar(name: str, base: Any) -> str:
    if name.endswith("address"):
        return "ADDR"
    if name.endswith(("_file", "_paths", "_path", "_directory")):
        return "PATH"
    if name.endswith("_seconds"):
        return "SECONDS"
    return {int: "INT", float: "NUMBER"}.get(base, "TEXT")


def _without_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        arguments = [argument for argument in typing.get_args(annotation) if argument is not type(None)]
        if len(arguments) == 1:
            return arguments[0]
    return annotation


def _claim(claimed: dict[str, str], spellings: Sequence[str], owner: str, section_type: type) -> None:
    for spelling in spellings:
        previous = claimed.setdefault(spelling, owner)
        if previous != owner:
            raise ValueError(f"{section_type.__name__}: {spelling} is claimed by both {previous} and {owner}")


def _declaring_class(section_type: type, field_name: str) -> type:
    """The most derived class in the MRO that declares the field."""
    for cls in section_type.__mro__:
        if field_name in inspect.get_annotations(cls):
            return cls
    return section_type


def _argument_groups(
    parser: argparse.ArgumentParser, section_type: type, prog: str
) -> dict[type, argparse._ArgumentGroup]:
    groups: dict[type, argparse._ArgumentGroup] = {}
    own = parser.add_argument_group(f"{prog} settings")
    for cls in section_type.__mro__:
        if cls.__name__ in _GROUP_TITLES:
            groups[cls] = parser.add_argument_group(_GROUP_TITLES[cls.__name__])
        elif dataclasses.is_dataclass(cls):
            groups[cls] = own
    return groups
