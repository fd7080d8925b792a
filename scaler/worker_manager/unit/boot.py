"""`python -m scaler.worker_manager.unit.boot '<manifest URL>'`: what a cloud unit runs once the image (or the
AMI's boot script) has this build of scaler installed.

1. Read the unit's manifest through its presigned URL and delete it at once (a second presigned URL), so that
   the URL, which the task's overrides or the instance's user data show to whoever may describe them, is worth
   nothing once the unit has booted, and nothing at all after the boot timeout (its expiry). The manifest holds
   what the unit installs, the program it runs, and its environment (the workers' keys among it).
2. Install what the manager ships (`install`), report how long the boot and the install took, and what failed.
3. Run the program (a pool of workers, or the hub), with the installed folder first on its PYTHONPATH, passing
   SIGTERM/SIGINT on; check that the scheduler is reachable from here, and say so in the report when it is not.
4. Exit with the program's code: an ECS task ends with it; an EC2 instance's boot script then powers off
   (terminate behaviour).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from scaler.worker_manager.unit.install import FailedInstall, download_wheels, install, write_stubs
from scaler.worker_manager.unit.report import REPORT_URL_VARIABLE, REPORT_VARIABLE, UnitReporter, http

logger = logging.getLogger("scaler.unit")

#: How long the scheduler may be unreachable from the unit before the report says so, and how often it is tried.
UNREACHABLE_AFTER_SECONDS = 20.0
REACH_RETRY_SECONDS = 5.0


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s unit-boot %(levelname)s %(message)s")
    if len(sys.argv) != 2:
        print("usage: python -m scaler.worker_manager.unit.boot MANIFEST_URL", file=sys.stderr)
        sys.exit(2)
    sys.exit(boot(sys.argv[1]))


def boot(manifest_url: str) -> int:
    started = time.time()
    try:
        manifest: dict[str, Any] = json.loads(http("GET", manifest_url))
    except (OSError, ValueError) as error:
        logger.error("cannot read this unit's manifest (%s): was the manager's bucket deleted?", error)
        return 1
    _delete_quietly(manifest.get("delete_url"))
    unit = f"unit {manifest.get('unit_id', '?')} of worker manager {manifest.get('manager_id', '?')}"
    reporter = UnitReporter(manifest.get("report_url"), unit_id=manifest.get("unit_id", ""), python=_python())
    reporter.send(state="installing", boot_seconds=round(started - float(manifest.get("launched_at", started)), 2))
    folder = Path(tempfile.mkdtemp(prefix="scaler-unit-"))
    try:
        target = folder / "site"
        target.mkdir()
        installing = time.time()
        failed = _install(manifest, folder, target, unit)
        reporter.send(
            state="starting", install_seconds=round(time.time() - installing, 2),
            problems=[f"{item.requirement} could not be installed: {item.why}" for item in failed],
        )  # fmt: skip
        for item in failed:
            logger.error("%s could not be installed: %s", item.requirement, item.why)
        return _run(manifest, target, reporter)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _install(manifest: dict[str, Any], folder: Path, target: Path, unit: str) -> list[FailedInstall]:
    wheel_files, failed = download_wheels(list(manifest.get("wheels", [])), folder / "wheels")
    failed += install(list(manifest.get("requirements", [])), wheel_files, target)
    write_stubs(failed, dict(manifest.get("modules", {})), target, unit)
    return failed


def _run(manifest: dict[str, Any], target: Path, reporter: UnitReporter) -> int:
    environment = dict(os.environ)
    environment.update({str(name): str(value) for name, value in manifest.get("environment", {}).items()})
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), environment.get("PYTHONPATH", "")]))
    environment[REPORT_URL_VARIABLE] = str(manifest.get("report_url", ""))
    reach = manifest.get("reach")
    if not reach:
        reporter.send(state="started")  # a program without a scheduler to reach (the hub) says `running` itself
    environment[REPORT_VARIABLE] = json.dumps(reporter.fields)
    program = subprocess.Popen([sys.executable, *manifest["program"]], env=environment, stdin=subprocess.DEVNULL)
    stopping = threading.Event()

    def forward(signum: int, frame: FrameType | None) -> None:
        stopping.set()
        try:
            program.send_signal(signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    if reach:
        threading.Thread(target=_watch_reach, args=(str(reach), reporter, stopping), daemon=True).start()
    code = program.wait()
    stopping.set()
    reporter.send(state="ended", exit_code=code)
    return code


def _watch_reach(address: str, reporter: UnitReporter, stopping: threading.Event) -> None:
    """Say in the report whether the scheduler can be reached from here (a unit whose workers cannot connect is
    otherwise only a unit that never registers)."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    first_try = time.monotonic()
    said = ""
    while not stopping.is_set():
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
                pass
            reporter.send(state="running", reached=address)
            return
        except (OSError, ValueError) as error:
            waited = time.monotonic() - first_try
            if waited >= UNREACHABLE_AFTER_SECONDS and said != str(error):
                said = str(error)
                problem = f"cannot reach the scheduler at {address} from this unit for {waited:.0f} s: {error}"
                logger.error("%s", problem)
                reporter.send(state="unreachable", problem=problem)
        stopping.wait(REACH_RETRY_SECONDS)


def _delete_quietly(url: object) -> None:
    if isinstance(url, str) and url:
        try:
            http("DELETE", url)
        except OSError as error:
            logger.warning("could not delete this unit's manifest: %s", error)


def _python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"


if __name__ == "__main__":
    main()
