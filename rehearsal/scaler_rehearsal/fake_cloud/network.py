"""The units' network when the fake cloud isolates them (`scaler_fake_cloud --isolate-network`, root only): a VPC of
network namespaces the cloud creates and removes, on TEST-NET addresses only.

    laptop (host namespace)                 router namespace sfc-<pid>-r                 unit namespaces sfc-<pid>-u<n>
    sfc<pid>h 198.51.100.(4s+1)/30  <veth>  up0 198.51.100.(4s+2)/30
    route 203.0.113.(32s)/27 via the router      br0 203.0.113.(32s+1)/27  <veths>  eth0 203.0.113.(32s+n)/27

- The endpoint (moto, the fake S3, the package index) listens on the laptop's side of the link, 198.51.100.(4s+1):
  units reach it, and the laptop reaches it at the same address (so presigned URLs work from both).
- Units reach one another (one bridge); the laptop opens connections to units' addresses (its route above).
- Units open no connection to the laptop (nor, through it, anywhere else) but to the endpoint's port: the router
  forwards only the replies of connections the laptop opened (conntrack ESTABLISHED), as a NAT would.

Nothing else on the machine is touched: the cloud owns its namespaces, the veth pairs inside them, the host end of
its link and the route through it (gone with the link). A slot `s` (0-7) is taken under a lock, so several clouds
run side by side; what a killed cloud left (names carry its pid) is removed by the next one to start.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil

PREFIX = "sfc"
SLOTS = 8
#: units per VPC: 203.0.113.(32s+2) ... (32s+30); .1 is the router
UNITS_PER_SLOT = 29
_LOCK_PATH = Path("/run/lock/scaler-fake-cloud-network.lock")
_NAMESPACE = re.compile(rf"^{PREFIX}-(\d+)-")
_HOST_LINK = re.compile(rf"^{PREFIX}(\d+)h$")
_TIMEOUT_SECONDS = 30.0


class NetworkError(Exception):
    """The units' network cannot be made; the message says what is missing."""


@dataclass(frozen=True)
class VpcPlan:
    """The names and addresses of one cloud's VPC (pure)."""

    pid: int
    slot: int

    @property
    def router(self) -> str:
        return f"{PREFIX}-{self.pid}-r"

    @property
    def host_link(self) -> str:
        return f"{PREFIX}{self.pid}h"

    @property
    def host_address(self) -> str:
        return f"198.51.100.{4 * self.slot + 1}"

    @property
    def router_address(self) -> str:
        return f"198.51.100.{4 * self.slot + 2}"

    @property
    def units_network(self) -> str:
        return f"203.0.113.{32 * self.slot}/27"

    @property
    def gateway(self) -> str:
        return f"203.0.113.{32 * self.slot + 1}"

    def unit_address(self, number: int) -> str:
        return f"203.0.113.{32 * self.slot + 1 + number}"

    def unit_namespace(self, number: int) -> str:
        return f"{PREFIX}-{self.pid}-u{number}"

    def firewall(self, endpoint_port: int) -> str:
        """The router's rules (nft): units reach each other and the endpoint; the laptop reaches the units."""
        return f"""table inet {PREFIX} {{
    chain forward {{
        type filter hook forward priority 0; policy drop;
        ct state established,related accept
        iifname "br0" oifname "br0" accept
        iifname "up0" oifname "br0" ip saddr {self.host_address} accept
        iifname "br0" oifname "up0" ip daddr {self.host_address} tcp dport {endpoint_port} accept
    }}
    chain input {{
        type filter hook input priority 0; policy drop;
        ct state established,related accept
        iifname "lo" accept
    }}
}}
"""


class UnitNetwork:
    """One cloud's VPC: made by `create`, a namespace per unit (`allocate`, `enter`, `release`), gone on `close`."""

    def __init__(self, plan: VpcPlan) -> None:
        self.plan = plan
        self.endpoint_port = 0
        self._numbers: dict[str, int] = {}  #: unit name -> its number in the VPC
        self._made: set[str] = set()  #: units whose namespace exists
        self._lock = threading.Lock()
        self._closed = False

    @property
    def endpoint_address(self) -> str:
        return self.plan.host_address

    @classmethod
    def create(cls) -> UnitNetwork:
        """The VPC's router and link (the firewall comes with `open_endpoint`, once the port is known)."""
        _check_tools()
        remove_leftovers()
        _LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
        with open(_LOCK_PATH, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = _routes_in_use()
            slot = next((slot for slot in range(SLOTS) if VpcPlan(0, slot).units_network not in used), None)
            if slot is None:
                raise NetworkError(
                    f"all {SLOTS} fake-cloud VPCs of this machine are in use (ip route | grep 203.0.113)"
                )
            network = cls(VpcPlan(os.getpid(), slot))
            try:
                network._make_router()
            except NetworkError:
                network.close()
                raise
        return network

    def open_endpoint(self, port: int) -> None:
        """The router's firewall, letting units reach the endpoint's `port` on the laptop's side."""
        self.endpoint_port = port
        _run(["ip", "netns", "exec", self.plan.router, "nft", "-f", "-"], stdin=self.plan.firewall(port))

    def allocate(self, name: str) -> str:
        """The address of unit `name` (known at launch, as an ENI's is)."""
        with self._lock:
            if name not in self._numbers:
                taken = set(self._numbers.values())
                free = [number for number in range(1, UNITS_PER_SLOT + 1) if number not in taken]
                if not free:
                    raise NetworkError(f"the fake cloud's VPC has no address left ({UNITS_PER_SLOT} units at most)")
                self._numbers[name] = free[0]
            return self.plan.unit_address(self._numbers[name])

    def enter(self, name: str, address: str) -> list[str]:
        """The argv prefix that runs a command in the unit's namespace (made now if needed)."""
        number = self._numbers[name]
        namespace = self.plan.unit_namespace(number)
        with self._lock:
            if name not in self._made:
                self._make_unit(number, namespace, address)
                self._made.add(name)
        return ["nsenter", f"--net=/run/netns/{namespace}", "--"]

    def release(self, name: str) -> None:
        """The unit is gone: its namespace (and its veth pair) too, its address free again."""
        with self._lock:
            number = self._numbers.pop(name, None)
            made = name in self._made
            self._made.discard(name)
        if number is not None and made:
            _delete_namespace(self.plan.unit_namespace(number))

    def close(self) -> None:
        """Everything the VPC made, gone: the units' namespaces, the router's, the link and its route."""
        if self._closed:
            return
        self._closed = True
        for namespace in _namespaces():
            if namespace.startswith(f"{PREFIX}-{self.plan.pid}-"):
                _delete_namespace(namespace)
        _run(["ip", "link", "delete", self.plan.host_link], check=False)

    def _make_router(self) -> None:
        plan, router = self.plan, self.plan.router
        _run(["ip", "netns", "add", router])
        _run(["ip", "link", "add", plan.host_link, "type", "veth", "peer", "name", "up0", "netns", router])
        _run(["ip", "addr", "add", f"{plan.host_address}/30", "dev", plan.host_link])
        _run(["ip", "link", "set", plan.host_link, "up"])
        for command in (
            ["link", "set", "lo", "up"],
            ["addr", "add", f"{plan.router_address}/30", "dev", "up0"],
            ["link", "set", "up0", "up"],
            ["link", "add", "br0", "type", "bridge"],
            ["addr", "add", f"{plan.gateway}/27", "dev", "br0"],
            ["link", "set", "br0", "up"],
            ["route", "add", "default", "via", plan.host_address],
        ):
            _run(["ip", "-n", router, *command])
        _run(["ip", "netns", "exec", router, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"])
        _run(["ip", "route", "add", plan.units_network, "via", plan.router_address, "dev", plan.host_link])

    def _make_unit(self, number: int, namespace: str, address: str) -> None:
        router = self.plan.router
        _delete_namespace(namespace)  # a leftover of a unit that had this number
        _run(["ip", "netns", "add", namespace])
        _run(["ip", "-n", router, "link", "add", f"v{number}", "type", "veth", "peer", "name", "eth0", "netns",
              namespace])  # fmt: skip
        _run(["ip", "-n", router, "link", "set", f"v{number}", "master", "br0", "up"])
        for command in (
            ["link", "set", "lo", "up"],
            ["addr", "add", f"{address}/27", "dev", "eth0"],
            ["link", "set", "eth0", "up"],
            ["route", "add", "default", "via", self.plan.gateway],
        ):
            _run(["ip", "-n", namespace, *command])


def remove_leftovers() -> list[str]:
    """Remove what fake clouds that are no longer running left (their processes, namespaces and links)."""
    removed = []
    for namespace in _namespaces():
        found = _NAMESPACE.match(namespace)
        if found and not psutil.pid_exists(int(found.group(1))):
            _delete_namespace(namespace)
            removed.append(namespace)
    for link in _host_links():
        found = _HOST_LINK.match(link)
        if found and not psutil.pid_exists(int(found.group(1))):
            _run(["ip", "link", "delete", link], check=False)
            removed.append(link)
    return removed


def _delete_namespace(namespace: str) -> None:
    """Kill what still runs in the namespace, then delete it."""
    pids = _run(["ip", "netns", "pids", namespace], check=False).split()
    for pid in pids:
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            continue
    _run(["ip", "netns", "delete", namespace], check=False)


def _namespaces() -> list[str]:
    return [line.split()[0] for line in _run(["ip", "netns", "list"], check=False).splitlines() if line.strip()]


def _host_links() -> list[str]:
    lines = _run(["ip", "-o", "link", "show"], check=False).splitlines()
    return [line.split(":")[1].strip().split("@")[0] for line in lines if line.count(":") >= 2]


def _routes_in_use() -> set[str]:
    return {line.split()[0] for line in _run(["ip", "-o", "route", "show"], check=False).splitlines() if line}


def _check_tools() -> None:
    if os.geteuid() != 0:
        raise NetworkError("--isolate-network needs root (it creates network namespaces, veth pairs and a route)")
    for tool, package in (("ip", "iproute2"), ("nft", "nftables"), ("nsenter", "util-linux")):
        if shutil.which(tool) is None:
            raise NetworkError(f"--isolate-network needs {tool} (Debian: apt-get install {package})")


def _run(argv: list[str], stdin: str | None = None, check: bool = True) -> str:
    completed = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=_TIMEOUT_SECONDS)
    if check and completed.returncode != 0:
        raise NetworkError(f"{' '.join(argv)}: {completed.stderr.strip() or completed.stdout.strip()}")
    return completed.stdout
