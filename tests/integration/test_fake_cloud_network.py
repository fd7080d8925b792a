"""`scaler_fake_cloud --isolate-network`: units in network namespaces of the cloud's own, on TEST-NET addresses.
A unit reaches the endpoint (moto, the fake S3, the package index) and nothing of the laptop's, neither 127.0.0.1
(its own) nor the laptop's side of the link; the laptop reaches a server in a unit at the address EC2 reports;
everything is gone when the cloud stops, and what a killed cloud left is removed by the next one.

Checked off: without `--isolate-network` the unit connects to the test's server on 127.0.0.1 and the first test
fails at its "REFUSED 127.0.0.1" assertion.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from scaler.io.address import free_tcp_port_block
from tests.integration.conftest import CLOUD_START_SECONDS, Launcher, Service, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.cloud,
    pytest.mark.timeout(180),
    pytest.mark.skipif(os.geteuid() != 0, reason="--isolate-network needs root (network namespaces)"),
    pytest.mark.skipif(shutil.which("nft") is None, reason="--isolate-network needs nft (apt-get install nftables)"),
]

UNIT_PORT = 7777


def start_isolated_cloud(launcher: Launcher, log_directory: Path) -> tuple[Service, str]:
    port = free_tcp_port_block(1)
    cloud = launcher.start("scaler_fake_cloud", "--port", str(port), "--isolate-network", "--log-dir",
                           str(log_directory))  # fmt: skip
    line = cloud.wait_for_log("AWS_ENDPOINT_URL=", CLOUD_START_SECONDS)
    endpoint = line.split("AWS_ENDPOINT_URL=", 1)[1].split()[0]
    return cloud, endpoint


def client(endpoint: str, service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing")  # fmt: skip


def owned_network(pid: int) -> list[str]:
    """The namespaces, links and routes of the cloud `pid` that exist now."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found = [name for name in namespaces if name.startswith(f"sfc-{pid}-")]
    named = [line.split(":")[1].strip().split("@")[0] for line in links.splitlines() if line.count(":") >= 2]
    return found + [f"link {name}" for name in named if name == f"sfc{pid}h"]


@pytest.fixture
def listeners() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for listener in opened:
        listener.close()


def listen(host: str, opened: list[socket.socket]) -> int:
    listener = socket.socket()
    listener.bind((host, 0))
    listener.listen()
    opened.append(listener)
    return int(listener.getsockname()[1])


def unit_script(endpoint: str, targets: list[tuple[str, int]], object_url: str) -> str:
    """User data: try the laptop's servers, fetch an object from the fake S3, then serve one line."""
    return f"""#!/bin/sh
python3 - <<'PY'
import socket, urllib.request
for host, port in {targets!r}:
    try:
        socket.create_connection((host, port), timeout=3).close()
        print("CONNECTED", host, flush=True)
    except OSError as error:
        print("REFUSED", host, error, flush=True)
print("S3", urllib.request.urlopen({object_url!r}, timeout=30).read().decode(), flush=True)
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", {UNIT_PORT}))
server.listen()
print("LISTENING", flush=True)
connection, _peer = server.accept()
connection.sendall(b"hello from the unit")
connection.close()
PY
"""


def test_an_isolated_unit_reaches_the_endpoint_and_nothing_of_the_laptops(
    launcher: Launcher, tmp_path: Path, listeners: list[socket.socket]
) -> None:
    cloud, endpoint = start_isolated_cloud(launcher, tmp_path / "logs")
    laptop_side = endpoint.split("//", 1)[1].rsplit(":", 1)[0]
    assert laptop_side.startswith("198.51.100."), endpoint
    targets = [("127.0.0.1", listen("127.0.0.1", listeners)), (laptop_side, listen(laptop_side, listeners))]
    s3 = client(endpoint, "s3")
    s3.create_bucket(Bucket="fidelity")
    s3.put_object(Bucket="fidelity", Key="note", Body=b"from the fake S3")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "fidelity", "Key": "note"})
    ec2 = client(endpoint, "ec2")
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="t2.micro",
                                 UserData=unit_script(endpoint, targets, url))["Instances"][0]  # fmt: skip
    address = instance["PrivateIpAddress"]
    assert address.startswith("203.0.113.") and instance.get("PublicIpAddress") in (None, address), instance
    log = tmp_path / "logs" / "ec2" / f"{instance['InstanceId']}.log"
    wait_for(lambda: log.exists() and "LISTENING" in log.read_text(), "the unit's server", 60)
    text = log.read_text()
    assert "REFUSED 127.0.0.1" in text and f"REFUSED {laptop_side}" in text, text
    assert "CONNECTED" not in text
    assert "S3 from the fake S3" in text
    with socket.create_connection((address, UNIT_PORT), timeout=10) as connection:
        assert connection.recv(100) == b"hello from the unit"

    assert owned_network(cloud.pid)
    cloud.popen.send_signal(signal.SIGTERM)
    assert cloud.wait_exit() == 0
    assert owned_network(cloud.pid) == [], "the cloud removes its namespaces and link when it stops"


def test_what_a_killed_cloud_left_is_removed_by_the_next(launcher: Launcher, tmp_path: Path) -> None:
    first, endpoint = start_isolated_cloud(launcher, tmp_path / "first")
    ec2 = client(endpoint, "ec2")
    ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="t2.micro",
                      UserData="#!/bin/sh\nexec sleep 600\n")  # fmt: skip
    wait_for(lambda: len(owned_network(first.pid)) >= 3, "the unit's namespace", 60)
    os.kill(first.pid, signal.SIGKILL)
    first.wait_exit()
    assert owned_network(first.pid), "a killed cloud cannot clean up"

    assert list(Path(tempfile.gettempdir()).glob(f"scaler-fake-cloud-units-{first.pid}-*"))
    second, _endpoint = start_isolated_cloud(launcher, tmp_path / "second")
    assert owned_network(first.pid) == [], "the next cloud removed the leftovers"
    assert not list(Path(tempfile.gettempdir()).glob(f"scaler-fake-cloud-units-{first.pid}-*")), "and its folders"
    second.popen.send_signal(signal.SIGTERM)
    assert second.wait_exit() == 0
    assert owned_network(second.pid) == []


def test_the_vpc_plan_uses_test_net_addresses_only() -> None:
    from scaler_rehearsal.fake_cloud.network import SLOTS, UNITS_PER_SLOT, VpcPlan

    for slot in range(SLOTS):
        plan = VpcPlan(4242, slot)
        addresses = [plan.host_address, plan.router_address, plan.gateway,
                     *(plan.unit_address(n) for n in range(1, UNITS_PER_SLOT + 1))]  # fmt: skip
        assert all(address.startswith(("198.51.100.", "203.0.113.")) for address in addresses)
        assert len(set(addresses)) == len(addresses)
        assert len(plan.host_link) <= 15 and plan.router.startswith("sfc-4242-")
