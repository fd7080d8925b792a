# PYTHON_ARGCOMPLETE_OK
"""`scaler_gui [options] MONITOR_ADDRESS` and its 1.x name `scaler_ui [--host H] [--port P] MONITOR_ADDRESS`:
serve the web dashboard of a scheduler (and its Prometheus metrics at /metrics)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

from scaler.config.commands import GUI
from scaler.config.loader import load_command
from scaler.config.sections import GUIConfig


def gui_main(argv: Sequence[str] | None = None) -> int:
    config, _ = load_command(GUI, argv)
    return _run(config)


def ui_main(argv: Sequence[str] | None = None) -> int:
    def web_flags(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--host", "--web-host", dest="web_host", default=None, help="host to listen on")
        parser.add_argument("--port", "--web-port", dest="web_port", type=int, default=None, help="port to listen on")

    description = GUI.description.replace("--gui-address 0.0.0.0:50001", "--host 0.0.0.0")  # the flag it takes
    config, extras = load_command(
        GUI, argv, web_flags, name="scaler_ui", toml_sections=["webui", "gui"], description=description
    )
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
