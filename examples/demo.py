"""The `make demo` script: start the local stack from config/local.toml, run a little work, stop it.

Usage: `python examples/demo.py [CONFIG_FILE]`.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

from scaler import Client
from scaler.io.port_owner import address_in_use_problem

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "config", "local.toml")
SCHEDULER = "tcp://127.0.0.1:8516"
STORAGE = "tcp://127.0.0.1:8517"


def square(value: int) -> int:
    return value * value


def main() -> int:
    config = sys.argv[1] if len(sys.argv) > 1 else CONFIG
    for address in (SCHEDULER, STORAGE):  # else another stack on these ports would answer the demo's client
        problem = address_in_use_problem(address)
        if problem is not None:
            print(f"demo: cannot start the local stack: {problem}; stop it first", file=sys.stderr)
            return 2
    print(f"starting the local stack: scaler {os.path.relpath(config)}", flush=True)
    # The stack's own logs would drown the demo's output: only warnings and errors (environment beats
    # the file, see docs/configuration.md).
    environment = {**os.environ, "SCALER_LOGGING_LEVEL": os.environ.get("SCALER_LOGGING_LEVEL", "WARNING")}
    stack = subprocess.Popen([sys.executable, "-m", "scaler.entry_points.launcher", config], env=environment)
    try:
        with Client(address=SCHEDULER, timeout_seconds=60) as client:
            started = time.perf_counter()
            future = client.submit(square, 4)
            print(f"submit: square(4) = {future.result()}")
            results = client.map(math.sqrt, range(100))
            print(f"map: sum of sqrt(0..99) = {sum(results):.2f}")
            print(f"map over 1,000 items: {len(client.map(square, range(1000)))} results")
            print(f"done in {time.perf_counter() - started:.2f} s")
    finally:
        stack.send_signal(signal.SIGINT)
        code = stack.wait(timeout=60)
    print(f"local stack stopped (exit code {code})")
    return code


if __name__ == "__main__":
    sys.exit(main())
