"""The names, addresses and rules of one rig of hosts (pure: no command runs here).

    router namespace rig<pid>n<k>r: bridge br0, one port v<n> per host    host namespace rig<pid>n<k>h<n>
        v<n>  (tbf: what the host receives; its counters: the host's bytes)  <veth>  eth0 198.51.100.(10+n)/24
                                                                                    (tbf: what the host sends)

Every name carries the pid of the process that made the rig (and the rig's number in that process, `k`), so that what a
killed rig left is found by that pid (the rig's own watchdog, tests/rig/watchdog.py, and the suite's reaper,
tests/reaping.py). The hosts share one subnet of
TEST-NET-2 and have no other route: nothing leaves the rig, and nothing of it is in the machine's own namespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Names of a rig's network namespaces: rig<pid>n<k>r (its router), rig<pid>n<k>h<n> (its hosts); the first group is
#: the pid of the process that made it.
NAMESPACE_NAME = re.compile(r"^rig(\d+)n\d+[rh]\d*$")
#: The hosts' subnet (TEST-NET-2, RFC 5737): host n is .(10 + n).
SUBNET = "198.51.100"
FIRST_HOST_OCTET = 10
MAX_HOSTS = 200
#: The nft table of a host's firewall (inside its namespace) and of the router's cuts (a bridge table).
HOST_TABLE = "rigwall"
ROUTER_TABLE = "rigcut"
#: tbf's queue: packets wait at most this long at a shaped link before they are dropped (TCP then slows down).
SHAPING_LATENCY_MS = 50
#: The smallest tbf bucket: a few full-size frames, so that the bucket never holds back a frame the link may send.
MIN_BURST_BYTES = 32 * 1024


@dataclass(frozen=True)
class HostPlan:
    name: str  #: the host's name (its UTS host name too)
    number: int  #: 1, 2, ...: its place in the rig
    prefix: str  #: its rig's names' start, rig<pid>n<k>

    @property
    def namespace(self) -> str:
        return f"{self.prefix}h{self.number}"

    @property
    def address(self) -> str:
        return f"{SUBNET}.{FIRST_HOST_OCTET + self.number}"

    @property
    def router_port(self) -> str:
        """Its link's end in the router (its counters are the host's bytes, seen from the network)."""
        return f"v{self.number}"


@dataclass(frozen=True)
class RigPlan:
    owner_pid: int
    number: int  #: the rig's number among those its process made
    hosts: tuple[HostPlan, ...]

    @classmethod
    def of(cls, owner_pid: int, number: int, names: list[str]) -> RigPlan:
        if not names:
            raise ValueError("a rig needs at least one host")
        if len(names) > MAX_HOSTS:
            raise ValueError(f"a rig has at most {MAX_HOSTS} hosts, not {len(names)}")
        if len(set(names)) != len(names):
            raise ValueError(f"host names repeat: {names}")
        bad = [name for name in names if not re.fullmatch(r"[a-z][a-z0-9-]{0,30}", name)]
        if bad:
            raise ValueError(f"host names are lowercase letters, digits and '-', starting with a letter: not {bad}")
        prefix = f"rig{owner_pid}n{number}"
        return cls(owner_pid, number, tuple(HostPlan(name, place, prefix) for place, name in enumerate(names, 1)))

    @property
    def prefix(self) -> str:
        return f"rig{self.owner_pid}n{self.number}"

    @property
    def router(self) -> str:
        return f"{self.prefix}r"

    def host(self, name: str) -> HostPlan:
        for host in self.hosts:
            if host.name == name:
                return host
        raise KeyError(f"no host {name!r} in the rig (its hosts: {', '.join(h.name for h in self.hosts)})")


def tbf_arguments(rate_bits: int) -> list[str]:
    """`tc qdisc ... tbf` arguments shaping a link to `rate_bits` per second."""
    burst = max(MIN_BURST_BYTES, rate_bits // 8 // 500)  # 2 ms of the rate
    return ["tbf", "rate", f"{rate_bits}bit", "burst", str(burst), "latency", f"{SHAPING_LATENCY_MS}ms"]


def host_firewall() -> str:
    """A host's firewall (nft, inside its namespace): drops what comes from or goes to the addresses in `blocked`."""
    return f"""table inet {HOST_TABLE} {{
    set blocked {{ type ipv4_addr; }}
    chain input {{ type filter hook input priority 0; policy accept; ip saddr @blocked drop; }}
    chain output {{ type filter hook output priority 0; policy accept; ip daddr @blocked drop; }}
}}
"""


def router_cuts() -> str:
    """The router's cuts (nft, a bridge table): drops every frame from or to the ports in `cut`."""
    return f"""table bridge {ROUTER_TABLE} {{
    set cut {{ type ifname; }}
    chain forward {{ type filter hook forward priority 0; policy accept; iifname @cut drop; oifname @cut drop; }}
}}
"""
