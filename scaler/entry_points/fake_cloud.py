"""`scaler_fake_cloud [--port PORT] [--boot-seconds S] [--spot-notice-seconds S]`: a local AWS endpoint that runs
what is launched on it."""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from scaler.version import __version__

#: The longest the command waits for the cloud to stop before it exits anyway.
STOP_SECONDS = 15.0


def main(argv: Sequence[str] | None = None) -> int:
    faulthandler.enable()  # a fatal error or SIGABRT prints every thread's stack (to the log), even mid-start
    parser = argparse.ArgumentParser(
        prog="scaler_fake_cloud",
        description="A local AWS endpoint (moto) on 127.0.0.1 that also runs what is launched on it: ECS tasks and "
        "EC2 instances start their commands as local processes after the boot delay, and stop when the task is "
        "stopped or the instance terminated. Point the cloud managers at it with the AWS_ENDPOINT_URL it prints.",
    )
    parser.add_argument("--port", type=int, default=5000, help="port to listen on (0: any free port)")
    parser.add_argument("--boot-seconds", type=float, default=0.0, help="delay between a launch and its start")
    parser.add_argument(
        "--spot-notice-seconds", type=float, default=120.0,
        help="how long an EC2 spot instance interrupted through the fault route runs on before it is terminated "
        "(AWS: 120)",
    )  # fmt: skip
    parser.add_argument("--log-dir", type=Path, default=None, help="where the launched commands' output goes")
    parser.add_argument(
        "--require-credentials", action="store_true", help="check requests' credentials against moto's IAM users"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    arguments = parser.parse_args(argv)
    if arguments.boot_seconds < 0:
        parser.error("--boot-seconds must not be negative")
    if arguments.spot_notice_seconds < 0:
        parser.error("--spot-notice-seconds must not be negative")
    try:
        from scaler.fake_cloud.cloud import FakeCloud
    except ImportError as error:
        print(f"scaler_fake_cloud needs the fake-cloud extra: pip install 'scaler-compute[fake-cloud]' ({error})",
              file=sys.stderr)  # fmt: skip
        return 2
    cloud = FakeCloud(
        arguments.port, arguments.boot_seconds, arguments.log_dir, arguments.require_credentials,
        arguments.spot_notice_seconds,
    )  # fmt: skip
    try:
        cloud.start()
    except (OSError, SystemExit) as error:
        print(f"scaler_fake_cloud: cannot listen on 127.0.0.1:{arguments.port}: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print(f"AWS_ENDPOINT_URL={cloud.endpoint_url}", flush=True)
    print(f"# launched commands log to {cloud.log_directory}; Ctrl-C stops the cloud and everything it runs",
          flush=True)  # fmt: skip
    while not stop.wait(0.5):  # a bounded wait: the signal handler runs between two of them at the latest
        pass
    # The launched processes are stopped first; the HTTP server's own shutdown may wait on a client's open
    # keep-alive connection, which must not keep the command from exiting.
    print("# stopping the cloud and everything it runs", flush=True)
    stopping = threading.Thread(target=cloud.stop, daemon=True)
    stopping.start()
    stopping.join(STOP_SECONDS)
    if stopping.is_alive():
        print(f"scaler_fake_cloud: the cloud did not stop within {STOP_SECONDS:g} s; exiting anyway", file=sys.stderr)
        faulthandler.dump_traceback(sys.stderr)
        sys.stderr.flush()
        return 1
    # The stop is done: nothing is left to finalise, and the interpreter's own shutdown (which waits for
    # whatever threads the AWS libraries left behind) must not keep the command from exiting.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
