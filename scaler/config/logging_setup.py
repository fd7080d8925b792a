"""The logging of one scaler process, set up from its `LoggingSettings`.

Stdlib only and cheap to import: every runtime process (scheduler, worker, manager, processor) calls it, and
none of them may pay for the command line's settings loader. A log sink that cannot be opened is reported once on
stderr and skipped; it never stops the process.
"""

from __future__ import annotations

import json
import logging
import sys
import time

from scaler.config.sections import LoggingSettings

#: e.g. "[INFO]2026-11-21 12:16:10+0000: scheduler: started"; the time is local, with its UTC offset.
LOG_FORMAT = "[%(levelname)s]%(asctime)s: {component}: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S%z"

#: Libraries whose INFO lines say nothing a user of scaler needs: kept at WARNING unless the level is higher.
QUIET_LIBRARIES = ("botocore", "boto3", "urllib3")

#: Attribute marking the handlers installed here, so that a second call replaces them instead of adding more.
_OWNED = "_scaler_logging_setup"


def setup_logging(settings: LoggingSettings, component: str) -> None:
    """Configure the root logger: `logging_config_file` if given (it overrides everything else), otherwise
    one handler per entry of `logging_paths` at `logging_level`, each line tagged with `component`."""
    root = logging.getLogger()
    _remove_own_handlers(root)
    if settings.logging_config_file is not None and _apply_config_file(settings.logging_config_file, component):
        return
    opened = [_open_handler(path, component) for path in settings.logging_paths]
    handlers = [handler for handler in opened if handler is not None]
    if settings.logging_paths and not handlers:
        handlers.append(logging.StreamHandler(sys.stderr))  # every sink failed: stderr rather than silence
    formatter: logging.Formatter
    if settings.logging_format == "json":
        formatter = JsonFormatter(component)
    else:
        formatter = logging.Formatter(LOG_FORMAT.format(component=component.replace("%", "%%")), DATE_FORMAT)
    for handler in handlers:
        handler.setFormatter(formatter)
        setattr(handler, _OWNED, True)
        root.addHandler(handler)
    root.setLevel(settings.logging_level)
    for chatty in QUIET_LIBRARIES:  # "Found credentials in environment variables" on every client they make
        logging.getLogger(chatty).setLevel(max(logging.WARNING, root.level))


#: record attributes that identify what a line is about; a JSON line carries those a record has
ID_ATTRIBUTES = ("task_id", "worker", "client", "manager")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: time (ISO 8601, local with its UTC offset), level, logger,
    component, message, the ids the record carries (`ID_ATTRIBUTES`) and the exception's traceback if any."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self._component = component

    def format(self, record: logging.LogRecord) -> str:
        local = time.localtime(record.created)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", local) + f".{int(record.msecs):03d}" + time.strftime("%z", local)
        line: dict[str, object] = {
            "time": stamp,
            "level": record.levelname,
            "logger": record.name,
            "component": self._component,
            "message": record.getMessage(),
        }
        for name in ID_ATTRIBUTES:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value.hex() if isinstance(value, bytes) else str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


def _open_handler(path: str, component: str) -> logging.Handler | None:
    """/dev/stdout and /dev/stderr are this process's streams (also where those device files do not exist)."""
    if path == "/dev/stdout":
        return logging.StreamHandler(sys.stdout)
    if path == "/dev/stderr":
        return logging.StreamHandler(sys.stderr)
    try:
        return logging.FileHandler(path, mode="a", encoding="utf-8")
    except OSError as error:
        print(
            f"{component}: cannot open log file {path} ({error.strerror or error}); not logging there", file=sys.stderr
        )
        return None


def _apply_config_file(path: str, component: str) -> bool:
    """True when the .conf file configured logging; otherwise the problem is reported and the caller falls back
    to the other logging settings."""
    import logging.config  # imported here: it pulls in socketserver and threading, which most processes never need

    try:
        with open(path, encoding="utf-8") as file:
            logging.config.fileConfig(file, disable_existing_loggers=False)
    # fileConfig reports a bad file with whatever configparser, the handler classes or the format strings raise.
    except Exception as error:
        print(
            f"{component}: cannot use logging config file {path} ({type(error).__name__}: {error}); "
            f"using the logging_paths and logging_level settings instead",
            file=sys.stderr,
        )
        return False
    return True


def _remove_own_handlers(root: logging.Logger) -> None:
    for handler in list(root.handlers):
        if getattr(handler, _OWNED, False):
            root.removeHandler(handler)
            handler.close()  # closes a log file; a stream handler leaves sys.stdout/sys.stderr open
