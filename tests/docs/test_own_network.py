"""A page's network of its own (tests/docs/own_network.py): the docs' ports are free in it while this process holds
them, its loopback is up, and it goes with its block, or with the test process when that is killed mid-block.

Checked off: with `own_network` yielding no prefix (the commands on the machine's network), the bind inside fails
with "Address already in use" and the first test fails; without the keepers' parent-death signal (KEPT empty), the
holder and slirp4netns outlive the killed process and the second test fails.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

import psutil
import pytest

from tests.docs.own_network import own_network, unavailable
from tests.integration.conftest import is_alive, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BIND = """
import socket, sys
server = socket.socket()
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen()
client = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
print("bound and reached", client.getpeername()[1])
"""


@pytest.fixture(autouse=True)
def _needs_own_network() -> None:
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"no network of its own for a page here: {reason}")


def test_a_port_this_process_holds_is_free_in_a_network_of_its_own() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with own_network() as prefix:
            inside = subprocess.run([*prefix, sys.executable, "-c", BIND, str(port)], capture_output=True, text=True,
                                    timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
        assert inside.returncode == 0, inside.stderr
        assert inside.stdout.split() == ["bound", "and", "reached", str(port)]
    gone = subprocess.run([*prefix, "true"], capture_output=True, timeout=30)
    assert gone.returncode != 0, "the namespace outlived its block"


HOLDS = """
import signal
from tests.docs.own_network import own_network
with own_network():
    print("inside", flush=True)
    signal.pause()  # until the test kills this process
"""


def test_the_networks_keepers_go_with_a_killed_test_process() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", HOLDS], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "inside\n"
            keepers = psutil.Process(holder.pid).children()
            assert sorted(keeper.name() for keeper in keepers) == ["sleep", "slirp4netns"], keepers
        finally:
            holder.send_signal(signal.SIGKILL)  # no finally block of its runs
    wait_for(lambda: not any(is_alive(keeper) for keeper in keepers), "the namespace's keepers to go with their parent")
