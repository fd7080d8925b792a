"""Shell completion of every command's flags, through argcomplete (the `completion` extra).

A shell that completes a command runs it with `_ARGCOMPLETE` set in the environment; each command hands its
parser to `offer_completion` before parsing, which then prints the completions and exits. A normal run never
imports argcomplete, and without the extra nothing changes. `scaler --completion SHELL` prints the shell code
that registers every scaler command (`shell_code`).
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence

#: The environment variable a completing shell sets.
COMPLETION_VARIABLE = "_ARGCOMPLETE"
#: Shells argcomplete writes registration code for.
SHELLS = ("bash", "zsh", "fish", "tcsh", "powershell")
#: Every console script of scaler is a function of a module in one of these packages: the product's, and its
#: rehearsals' (the scaler-rehearsal distribution the `fake-cloud` and `fake-kubernetes` extras install; only named
#: here, never imported).
ENTRY_POINTS_PACKAGES = ("scaler.entry_points.", "scaler_rehearsal.entry_points.")


class CompletionUnavailable(Exception):
    """argcomplete is not installed."""


def is_completing() -> bool:
    """Whether this process was started by a shell to complete its command line."""
    return COMPLETION_VARIABLE in os.environ


def offer_completion(parser: argparse.ArgumentParser) -> None:
    """When a shell asks (see `is_completing`), print the completions of `parser` and exit; else return."""
    if not is_completing():
        return
    try:
        import argcomplete
    except ImportError:
        return
    argcomplete.autocomplete(parser)


def words_before_cursor() -> list[str]:
    """The words of the command line being completed, before the word under the cursor (program excluded).
    Commands whose parser depends on an earlier word (`scaler_worker_manager TYPE`) read it here."""
    line = os.environ.get("COMP_LINE", "")
    point = int(os.environ.get("COMP_POINT", len(line)))
    typed = line[:point]
    try:
        words = shlex.split(typed)
    except ValueError:  # an open quote in the word being completed
        words = typed.split()
    if words and not typed[-1:].isspace():
        words = words[:-1]
    return words[1:]


def worker_manager_completion_parser(prog: str, names: Sequence[str], type_name: str | None) -> argparse.ArgumentParser:
    """What a shell completing `scaler_worker_manager` is offered: the types, then the settings of the type
    already typed (or of `type_name`, for a command of one type)."""
    from scaler.config.cli import build_parser
    from scaler.config.manager_types import MANAGER_TYPES

    parents = []
    if type_name is None:
        head = argparse.ArgumentParser(add_help=False)
        head.add_argument("type", choices=names)
        parents.append(head)
        type_name = next((word for word in words_before_cursor() if word in names), None)
    if type_name not in MANAGER_TYPES:
        parser = argparse.ArgumentParser(prog=prog, parents=parents)
        parser.add_argument("-c", "--config", metavar="FILE")
        return parser
    section = build_parser(MANAGER_TYPES[type_name].section, prog)
    return argparse.ArgumentParser(prog=prog, add_help=False, parents=[*parents, section])


def command_names() -> list[str]:
    """The installed console scripts of scaler and of its rehearsals, sorted."""
    from importlib.metadata import entry_points

    scripts = entry_points(group="console_scripts")
    return sorted({script.name for script in scripts if script.value.startswith(ENTRY_POINTS_PACKAGES)})


def shell_code(shell: str) -> str:
    """The code that makes `shell` complete every scaler command (`eval "$(scaler --completion bash)"`)."""
    try:
        from argcomplete.shell_integration import shellcode
    except ImportError:
        raise CompletionUnavailable(
            "shell completion needs argcomplete: pip install 'scaler-compute[completion]'"
        ) from None
    code: str = shellcode(command_names(), shell=shell)
    return code
