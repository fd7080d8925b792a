# PYTHON_ARGCOMPLETE_OK
"""`scaler_gui [options] MONITOR_ADDRESS` and its 1.x name `scaler_ui [--host H] [--port P] MONITOR_ADDRESS`:
serve the web dashboard of a scheduler (and its Prometheus metrics at /metrics)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

from scaler.config.loader import load_section_with_extras
from scaler.config.sections import GUIConfig

DESCRIPTION = (
    "Serve a live web dashboard of a scheduler (page at /, Prometheus metrics at /metrics). It listens on "
    "127.0.0.1 only; to reach it from other machines give a public host ({flag}) and protect it: anyone who "
    "reaches it sees the cluster's workers, clients and tasks."
)


def gui_main(argv: Sequence[str] | None = None) -> int:
    config, _ = load_section_with_extras(
        GUIConfig,
        argv,
        prog="scaler_gui",
        description=DESCRIPTION.format(flag="--gui-address 0.0.0.0:50001"),
        toml_sections=["gui", "webui"],
    )
    return _run(config)


def ui_main(argv: Sequence[str] | None = None) -> int:
    def web_flags(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--host", "--web-host", dest="web_host", default=None, help="host to listen on")
        parser.add_argument("--port", "--web-port", dest="web_port", type=int, default=None, help="port to listen on")

    config, extras = load_section_with_extras(
        GUIConfig, argv, prog="scaler_ui", description=DESCRIPTION.format(flag="--host 0.0.0.0"),
        toml_sections=["webui", "gui"], env_section="gui", extra_arguments=web_flags,
    )  # fmt: skip
    host, _, port = config.gui_address.rpartition(":")
    if extras.web_host is not None or extras.web_port is not None:
        address = f"{extras.web_host or host}:{extras.web_port or port}"
        config = dataclasses.replace(config, gui_address=address)
    return _run(config)


def _run(config: GUIConfig) -> int:
    from scaler.config.logging_setup import setup_logging
    from scaler.monitor.dashboard import run_dashboard

    setup_logging(config, "dashboard")
    return run_dashboard(config)
