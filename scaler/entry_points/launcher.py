# PYTHON_ARGCOMPLETE_OK
"""`scaler FILE`: start a whole stack (object storage, scheduler, worker managers) from one TOML file;
`scaler --example [NAME]`: list the example files that ship with the package, or print one; `scaler --docs [NAME]`:
the same for the documentation's pages."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from scaler.config.cli import SettingsParser, add_setting_flags
from scaler.config.completion import SHELLS, offer_completion
from scaler.config.sections import LauncherConfig
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.version import __version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = SettingsParser(
        prog="scaler",
        description="Start object storage, the scheduler and every [[worker_manager]] of a TOML file; "
        "Ctrl-C or SIGTERM stops them all.",
    )
    parser.add_argument(
        "file", nargs="?", help="the TOML file ([object_storage_server], [scheduler], [[worker_manager]])"
    )
    parser.add_argument(
        "--example",
        nargs="?",
        const="",
        metavar="NAME",
        help="print the example file NAME (e.g. `scaler --example local > local.toml`); without NAME, list them",
    )
    parser.add_argument(
        "--docs",
        nargs="?",
        const="",
        metavar="NAME",
        help="print the page NAME of the documentation installed with scaler (e.g. `scaler --docs scaling`, "
        "`scaler --docs guide/bursting`); without NAME, list them",
    )
    parser.add_argument(
        "--open", action="store_true",
        help="with --docs [NAME]: open the documentation site (the page NAME, else its index) in a browser; "
        "`scaler --docs try --open` serves it on a free port for the page that runs scaler in your browser",
    )  # fmt: skip
    parser.add_argument(
        "--serve", type=int, metavar="PORT",
        help="with --docs [NAME]: serve the documentation site at http://127.0.0.1:PORT/ (0: a free port) until Ctrl-C",
    )  # fmt: skip
    parser.add_argument(
        "--completion",
        choices=SHELLS,
        metavar="SHELL",
        help=f"print the code that makes SHELL ({', '.join(SHELLS)}) complete every scaler command, e.g. "
        '`eval "$(scaler --completion bash)"` in ~/.bashrc (needs the completion extra)',
    )
    parser.add_argument(
        "--logging-format",
        choices=("text", "json"),
        help="the logging format of every process the file starts (overrides the sections' logging_format); "
        "json: one JSON object per line",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--down", action="store_true",
        help="start nothing: list and terminate what the file's cloud worker managers left in the cloud",
    )  # fmt: skip
    launcher_settings = parser.add_argument_group("the file's [scaler] settings (flags override the file)")
    add_setting_flags(launcher_settings, LauncherConfig)
    offer_completion(parser)
    arguments = parser.parse_args(argv)
    if arguments.completion is not None:
        return _print_completion(arguments.completion)
    if (arguments.open or arguments.serve is not None) and arguments.docs is None:
        parser.error("--open and --serve show the documentation: give them with --docs [NAME]")
    if arguments.example is not None or arguments.docs is not None:
        if arguments.file is not None:
            parser.error("give either FILE or --example/--docs, not both")
        if arguments.example is not None:
            return _print_example(arguments.example)
        if arguments.open or arguments.serve is not None:
            return _show_site(arguments.docs, arguments.serve)
        return _print_docs(arguments.docs)
    if arguments.file is None:
        parser.error("the TOML file is required (`scaler --example` lists the example files)")
    from scaler.config.loader import ConfigError

    try:
        file = _checked_file(arguments)
    except (ConfigError, ValueError) as error:
        print(f"scaler: error: {error}", file=sys.stderr)
        return EXIT_CONFIGURATION
    for notice in file.notices:
        print(f"scaler: {notice}", file=sys.stderr)
    if arguments.logging_format is not None:
        file = _with_logging_format(file, arguments.logging_format)
    from scaler.cluster.launcher import Launcher
    from scaler.config.logging_setup import setup_logging
    from scaler.config.sections import LoggingSettings

    logging_settings = file.scheduler or file.object_storage_server or LoggingSettings()
    setup_logging(logging_settings, "scaler")
    if arguments.down:
        from scaler.cluster.stack_down import take_down

        return take_down(file)
    return Launcher(file, path=arguments.file).run()


def _checked_file(arguments: argparse.Namespace) -> Any:
    """The launcher file with the command line's [scaler] flags, checked as far as it can be before anything
    starts; ConfigError or ValueError naming what is wrong."""
    from scaler.config.loader import ConfigError, load_launcher_file

    flags = {field.name: getattr(arguments, field.name) for field in fields(LauncherConfig) if field.name in arguments}
    file = load_launcher_file(arguments.file, flags)
    if file.security is not None:
        from scaler.cluster.stack_security import check_stack_keys

        check_stack_keys(file.security)
    from scaler.cluster.cloud_stack import cloud_stack_problem

    problem = _address_problem(file) or cloud_stack_problem(file) or _missing_extra(file)
    if problem is None and not arguments.down:  # `--down` runs nothing of the file's
        problem = _event_loop_problem(file) or _default_ami_problem(file)
    if problem is not None:
        raise ConfigError(f"{arguments.file}: {problem}")
    if file.scheduler is not None:
        from scaler.scheduler.process import policy_problem

        try:
            policy_problem(file.scheduler)
        except ValueError as error:  # naming the misspelt policy or key
            raise ConfigError(f"{arguments.file}: [scheduler] {error}") from None
    return file


#: The settings that are the HOST:PORT of an HTTP server, with an example; every other `*address` is a ZeroMQ one.
_HTTP_ADDRESSES = {"gui_address": "127.0.0.1:50001", "metrics_address": "127.0.0.1:8519"}


def _address_problem(file: Any) -> str | None:
    """The first malformed address of the file, with its section and key. Said before anything starts: a
    [scheduler] bind_address without tcp:// stopped the start-up half way with exit code 1, a dashboard port of
    99999 was a traceback once the rest of the stack had started."""
    from scaler.config.manager_types import manager_type_of
    from scaler.io.address import AddressError, parse_address, parse_http_address

    sections = [("[object_storage_server]", file.object_storage_server), ("[scheduler]", file.scheduler),
                ("[gui]", file.gui)]  # fmt: skip
    for manager in file.worker_managers:
        sections.append((f"[[worker_manager]] {manager.worker_manager_id or manager_type_of(manager).name!r}", manager))
    for label, section in sections:
        for field in fields(section) if section is not None else ():
            value = getattr(section, field.name)
            if not field.name.endswith("address") or not isinstance(value, str) or not value:
                continue
            try:
                if field.name in _HTTP_ADDRESSES:  # its message names it
                    parse_http_address(value, field.name, _HTTP_ADDRESSES[field.name])
                else:
                    parse_address(value)
            except AddressError as error:
                return f"{label} {'' if field.name in _HTTP_ADDRESSES else field.name + ': '}{error}"
    return None


def _missing_extra(file: Any) -> str | None:
    """The first of the file's worker managers whose type needs an extra that is not installed, said in one line."""
    from scaler.config.manager_types import manager_type_of, missing_extra

    for manager in file.worker_managers:
        problem = missing_extra(manager_type_of(manager))
        if problem is not None:
            return f"[[worker_manager]] {manager.worker_manager_id or manager_type_of(manager).name!r}: {problem}"
    return None


def _default_ami_problem(file: Any) -> str | None:
    """The first orb_aws_ec2 manager whose instances cannot run this Python: the default AMI neither has nor
    installs it. Said before anything starts: otherwise a cloud hub (an instance of the same AMI) or the first unit
    would be launched, boot, and fail there."""
    from scaler.config.sections import EC2WorkerManagerConfig

    managers = [manager for manager in file.worker_managers if isinstance(manager, EC2WorkerManagerConfig)]
    if not managers:
        return None
    from scaler.worker_manager.orb_aws_ec2.manager import default_ami_problem

    for manager in managers:
        problem = default_ami_problem(manager.image_id, setting="image_id")
        if problem is not None:
            return f"[[worker_manager]] {manager.worker_manager_id!r}: {problem}"
    return None


def _event_loop_problem(file: Any) -> str | None:
    """The first section this machine runs (the scheduler, unless it runs in the cloud hub; each worker manager)
    whose event loop it cannot run, said in one line."""
    from scaler.config.event_loops import event_loop_problem
    from scaler.config.manager_types import manager_type_of

    if file.scheduler is not None and file.launcher.hub == "local":
        problem = event_loop_problem(file.scheduler)
        if problem is not None:
            return f"[scheduler] {problem}"
    for manager in file.worker_managers:
        problem = event_loop_problem(manager)
        if problem is not None:
            return f"[[worker_manager]] {manager.worker_manager_id or manager_type_of(manager).name!r}: {problem}"
    return None


def _with_logging_format(file: Any, logging_format: str) -> Any:
    from dataclasses import replace

    def each(section: Any) -> Any:
        return None if section is None else replace(section, logging_format=logging_format)

    return replace(
        file,
        object_storage_server=each(file.object_storage_server),
        scheduler=each(file.scheduler),
        gui=each(file.gui),
        worker_managers=tuple(each(manager) for manager in file.worker_managers),
    )


def _print_completion(shell: str) -> int:
    from scaler.config.completion import CompletionUnavailable, shell_code

    try:
        text = shell_code(shell)
    except CompletionUnavailable as error:
        print(f"scaler: error: {error}", file=sys.stderr)
        return EXIT_CONFIGURATION
    return _write(text + "\n")


def _print_example(name: str) -> int:
    from scaler.config.example_files import example_listing, example_text
    from scaler.config.toml_file import ConfigError  # not the loader, which a listing does not need

    try:
        text = example_text(name) if name else example_listing("scaler") + "\n"
    except ConfigError as error:
        print(f"scaler: error: {error}", file=sys.stderr)
        return EXIT_CONFIGURATION
    return _write(text)


def _print_docs(name: str) -> int:
    from scaler.config.installed_docs import docs_listing, page_for_terminal
    from scaler.config.toml_file import ConfigError

    if name.strip() == "try":
        return _write(TRY_PAGE_TEXT)
    try:
        text = page_for_terminal(name) if name else docs_listing("scaler") + "\n"
    except ConfigError as error:
        print(f"scaler: error: {error}", file=sys.stderr)
        return EXIT_CONFIGURATION
    return _write(text)


#: What `scaler --docs try` prints: that page runs in a browser, served.
TRY_PAGE_TEXT = """The page "Try it in your browser" runs scaler's client in a web page; it runs only when served:

    scaler --docs try --open          # served on a free port, opened in your browser
    scaler --docs try --serve 8765    # then open http://127.0.0.1:8765/try/index.html

How to start a cluster it reaches: `scaler --docs browser`.
"""


def _show_site(name: str, port: int | None) -> int:
    """`--docs [NAME] --open`: the site's page in a browser; `--serve PORT`: the site served until Ctrl-C. The page
    "Try it in your browser" (NAME `try`) runs only when served: `--open` serves the site on a free port for it."""
    import webbrowser

    from scaler.config import docs_site
    from scaler.config.loader import ConfigError

    serving = port is not None or name.strip() == docs_site.TRY_PAGE
    try:
        if serving:
            _serve_site(name, port if port is not None else 0, opening=port is None)
            return 0
        address = docs_site.page_address(name)
    except ConfigError as error:
        print(f"scaler: error: {error}", file=sys.stderr)
        return EXIT_CONFIGURATION
    except OSError as error:  # the port taken, the cache folder not writable
        print(f"scaler: error: cannot show the documentation: {error}", file=sys.stderr)
        return EXIT_CONFIGURATION
    if webbrowser.open(address):
        print(f"scaler: opened {address}")
    else:
        print(f"scaler: no browser found here: open {address}, or serve it with `scaler --docs --serve 8000`")
    return 0


def _serve_site(name: str, port: int, opening: bool) -> None:
    """The site with what the try page loads (its wheels, made from what is installed here; Pyodide from the cache
    when it has it), until Ctrl-C; `opening`: the page opened in a browser once it is served."""
    import tempfile
    import webbrowser
    from pathlib import Path

    from scaler.browser import served_page
    from scaler.config import docs_site

    with tempfile.TemporaryDirectory(prefix="scaler-try-page-") as scratch:
        page = served_page.served_page(Path(scratch), server_python=served_page.python_minor())
        cache = served_page.pyodide_folder(served_page.runtime_cache())

        def ready(url: str) -> None:
            print(f"scaler: the documentation at {url} (Ctrl-C stops)", flush=True)
            where = f"from {cache}" if page.local_runtime else f"from {served_page.PYODIDE_CDN} ({cache} has none)"
            print(f'scaler: its page "Try it in your browser" loads Pyodide {where}', flush=True)
            if page.problem is not None:
                print(f'scaler: its page "Try it in your browser" cannot run: {page.problem}', file=sys.stderr)
            if opening and not webbrowser.open(url):
                print(f"scaler: no browser found here: open {url}", flush=True)

        docs_site.serve(port, name, ready, page.files)


def _write(text: str) -> int:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `scaler --example aws_ec2 | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
