# PYTHON_ARGCOMPLETE_OK
"""`scaler_fake_cloud [--port PORT] [--boot-seconds S] [--isolate-network] [--image ...]`: a local AWS endpoint that
runs what is launched on it, each unit started from nothing (docs/worker_managers.md, 7.1)."""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from scaler.config.completion import offer_completion
from scaler.version import __version__
from scaler_rehearsal.command import StopSignals, say, say_extra_missing

#: The longest the command waits for the launched processes, the runners and the servers to stop.
STOP_SECONDS = 60.0
#: The longest it then waits for the units' folders to be removed (thousands of files each: slow on a loaded disk);
#: what is left then is removed by the next scaler_fake_cloud started on this machine.
FOLDERS_SECONDS = 120.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(  # flags only as written in full (as SettingsParser)
        allow_abbrev=False,
        prog="scaler_fake_cloud",
        description="A local AWS endpoint (moto) that also runs what is launched on it: ECS tasks, EC2 instances and "
        "Batch jobs start from nothing (their image's or AMI's Python, the packages their boot installs) as local "
        "process groups after the boot delay, and stop when the task is stopped or the instance terminated. Point "
        "the cloud managers at it with the AWS_ENDPOINT_URL it prints.",
    )
    parser.add_argument("--port", type=int, default=5000, help="port to listen on (0: any free port)")
    parser.add_argument("--boot-seconds", type=float, default=0.0, help="delay between a launch and its start")
    parser.add_argument(
        "--spot-notice-seconds", type=float, default=120.0,
        help="how long an EC2 spot instance interrupted through the fault route runs on before it is terminated "
        "(AWS: 120)",
    )  # fmt: skip
    parser.add_argument(
        "--log-dir", type=Path, default=None,
        help="where the launched commands' output goes, kept after the cloud stops (default: a folder of the units' "
        "folders, removed with them)",
    )  # fmt: skip
    parser.add_argument(
        "--require-credentials", action="store_true", help="check requests' credentials against moto's IAM users"
    )
    parser.add_argument(
        "--isolate-network", action="store_true",
        help="run the units in network namespaces of the cloud's own (root only; needs ip and nft): they reach the "
        "endpoint and each other, the laptop reaches them, they reach nothing of the laptop's",
    )  # fmt: skip
    parser.add_argument(
        "--image", action="append", default=[], metavar="REPOSITORY[=PYTHON[:REQUIREMENTS]]",
        help="another repository name of the worker image the cloud can pull, with its default Python and the "
        "requirements baked into it; repeatable. Known without it: scaler-worker (nothing baked in) and "
        "scaler-batch-job (this build of scaler and boto3 baked in, as docker/batch-job.Dockerfile makes it)",
    )  # fmt: skip
    parser.add_argument(
        "--cache-dir", type=Path, default=None,
        help="where the package index mirror keeps what it downloaded from PyPI between runs, and the units' links "
             "to this machine's commands (default: ~/.cache/scaler-fake-cloud)",
    )  # fmt: skip
    parser.add_argument(
        "--package-index", default=None, help="the package index the units install from (default: PyPI's simple API)"
    )
    parser.add_argument(
        "--ami-has-uv", action="store_true",
        help="EC2 instances boot from an AMI that has uv on its PATH, as one baked for scaler does (default: stock "
        "Amazon Linux 2023, whose instances install uv with pip at each boot, as in AWS)",
    )  # fmt: skip
    parser.add_argument(
        "--container-engine", choices=("docker",), default=None,
        help="run ECS tasks as containers of their image with this engine (the image must exist locally)",
    )  # fmt: skip
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    faulthandler.enable()  # a fatal error or SIGABRT prints every thread's stack (to the log), even mid-start
    parser = _parser()
    offer_completion(parser)
    arguments = parser.parse_args(argv)
    if arguments.boot_seconds < 0:
        parser.error("--boot-seconds must not be negative")
    if arguments.spot_notice_seconds < 0:
        parser.error("--spot-notice-seconds must not be negative")
    cloud = _make_cloud(parser, arguments)
    if cloud is None:
        return 2
    try:
        cloud.start()
    except (OSError, SystemExit) as error:
        cloud.stop()
        print(f"scaler_fake_cloud: cannot listen on {cloud.host}:{arguments.port}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C during the few seconds of the start (moto's imports): a stop, no traceback
        return _stopped(cloud, [signal.SIGINT])
    stops = StopSignals()
    stops.install()
    print(f"AWS_ENDPOINT_URL={cloud.endpoint_url}", flush=True)
    print(f"# launched commands log to {cloud.log_directory}; Ctrl-C stops the cloud and everything it runs",
          flush=True)  # fmt: skip
    if cloud.network is not None:
        plan = cloud.network.plan
        print(f"# units run in network namespaces {plan.router[:-2]}-*: addresses {plan.units_network}, the laptop's "
              f"side {plan.host_address}", flush=True)  # fmt: skip
    stops.wait()
    return _stopped(cloud, stops.received)


def _stopped(cloud: Any, signals: list[int]) -> int:
    """Stop the cloud (its processes first, then the units' folders, each wait bounded) and exit: 0, or 1 naming what
    could not be stopped. A second Ctrl-C while the folders are removed leaves them to the next fake cloud."""
    # The launched processes are stopped first; the HTTP server's own shutdown may wait on a client's open
    # keep-alive connection, which must not keep the command from exiting.
    say("# stopping the cloud and everything it runs")
    if not _within(lambda: cloud.stop(remove_folders=False), STOP_SECONDS, lambda: False):
        say(f"scaler_fake_cloud: the cloud's processes and servers did not all stop within {STOP_SECONDS:g} s; "
            f"exiting (its units' logs: {cloud.log_directory})", sys.stderr)  # fmt: skip
        return _exit(1)
    folders = cloud.state_directory
    say(f"# removing the units' folders ({folders}); Ctrl-C leaves them to the next scaler_fake_cloud")
    signalled = len(signals)
    if not _within(cloud.remove_folders, FOLDERS_SECONDS, lambda: len(signals) > signalled):
        say(f"# left the rest of {folders}: the next scaler_fake_cloud started on this machine removes it")
    return _exit(0)


def _within(work: Callable[[], object], seconds: float, interrupted: Callable[[], bool]) -> bool:
    """Run `work` on a thread and wait for it, at most `seconds` and until `interrupted()`; whether it finished."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    deadline = time.monotonic() + seconds
    while thread.is_alive() and time.monotonic() < deadline and not interrupted():
        thread.join(0.2)
    return not thread.is_alive()


def _exit(code: int) -> NoReturn:
    """The stop is done: nothing is left to finalise, and the interpreter's own shutdown (which waits for whatever
    threads the AWS libraries left behind, or a folder still being removed) must not keep the command from
    exiting."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _make_cloud(parser: argparse.ArgumentParser, arguments: argparse.Namespace) -> Any:
    """The cloud the flags describe, or None (said why on stderr)."""
    try:
        from scaler_rehearsal.fake_cloud.cloud import FakeCloud
        from scaler_rehearsal.fake_cloud.images import parse_image_option
        from scaler_rehearsal.fake_cloud.network import NetworkError
    except ImportError as error:
        say_extra_missing("scaler_fake_cloud", "fake-cloud", error)
        return None
    try:
        images = [parse_image_option(text) for text in arguments.image]
    except ValueError as error:
        parser.error(str(error))
    if arguments.container_engine and arguments.isolate_network:
        parser.error("--container-engine and --isolate-network do not go together yet: containers share the laptop's "
                     "network (`scaler --docs worker_managers`, 7.1)")  # fmt: skip
    options: dict[str, Any] = {"images": images, "cache_directory": arguments.cache_dir,
                               "isolate_network": arguments.isolate_network,
                               "container_engine": arguments.container_engine,
                               "ami_has_uv": arguments.ami_has_uv}  # fmt: skip
    if arguments.package_index:
        options["package_index"] = arguments.package_index
    try:
        return FakeCloud(arguments.port, arguments.boot_seconds, arguments.log_dir, arguments.require_credentials,
                          arguments.spot_notice_seconds, **options)  # fmt: skip
    except (NetworkError, RuntimeError) as error:
        print(f"scaler_fake_cloud: {error}", file=sys.stderr)
        return None


if __name__ == "__main__":
    raise SystemExit(main())
