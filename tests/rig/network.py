"""The rig's network, made and changed with `ip`, `tc` and `nft` (its plan: plan.py): the router and its bridge, each
host's link, shaped on both ends, its counters, and the faults (a link cut at the router, a firewall between two
hosts inside their namespaces)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass

from tests.rig.plan import HOST_TABLE, ROUTER_TABLE, HostPlan, RigPlan, host_firewall, router_cuts, tbf_arguments

COMMAND_TIMEOUT_SECONDS = 30.0
#: What the rig runs, and the Debian package of each.
TOOLS = {"ip": "iproute2", "tc": "iproute2", "nft": "nftables", "nsenter": "util-linux", "unshare": "util-linux"}


class RigError(Exception):
    """The rig cannot be made or changed; the message says what failed."""


def unavailable() -> str | None:
    """Why no rig can be made on this machine (None: one can)."""
    if os.geteuid() != 0:
        return "the rig of hosts needs root (network, mount and PID namespaces, veth links, tc)"
    missing = [f"{tool} (Debian: {package})" for tool, package in TOOLS.items() if shutil.which(tool) is None]
    if missing:
        return f"the rig of hosts needs {', '.join(missing)}"
    return None


def run(*argv: str, stdin: str | None = None, check: bool = True) -> str:
    try:
        completed = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise RigError(f"{' '.join(argv)} did not end within {COMMAND_TIMEOUT_SECONDS:g} s") from None
    if check and completed.returncode != 0:
        raise RigError(f"{' '.join(argv)}: {completed.stderr.strip() or completed.stdout.strip()}")
    return completed.stdout


def make_router(plan: RigPlan) -> None:
    router = plan.router
    run("ip", "netns", "add", router)
    run("ip", "-n", router, "link", "set", "lo", "up")
    run("ip", "-n", router, "link", "add", "br0", "type", "bridge")
    run("ip", "-n", router, "link", "set", "br0", "up")
    run("ip", "netns", "exec", router, "nft", "-f", "-", stdin=router_cuts())


def make_link(plan: RigPlan, host: HostPlan, rate_bits: int) -> None:
    """The host's namespace and its link to the router's bridge, shaped to `rate_bits` per second each way."""
    router, namespace, port = plan.router, host.namespace, host.router_port
    run("ip", "netns", "add", namespace)
    run("ip", "-n", router, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", namespace)
    run("ip", "-n", router, "link", "set", port, "master", "br0", "up")
    run("ip", "-n", namespace, "link", "set", "lo", "up")
    run("ip", "-n", namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
    run("ip", "-n", namespace, "link", "set", "eth0", "up")
    shape(plan, host, rate_bits)
    run("ip", "netns", "exec", namespace, "nft", "-f", "-", stdin=host_firewall())


def shape(plan: RigPlan, host: HostPlan, rate_bits: int) -> None:
    """tbf on both ends of the host's link: its own end shapes what it sends, the router's what it receives."""
    for namespace, device in ((host.namespace, "eth0"), (plan.router, host.router_port)):
        run("tc", "-n", namespace, "qdisc", "replace", "dev", device, "root", *tbf_arguments(rate_bits))


@dataclass(frozen=True)
class Shaping:
    """What tc says is on one end of a link."""

    kind: str
    rate_bits: int


def shaping(namespace: str, device: str) -> Shaping:
    """The root queue discipline on `device` and its rate (0 when it has none)."""
    for qdisc in json.loads(run("tc", "-j", "-n", namespace, "qdisc", "show", "dev", device) or "[]"):
        if qdisc.get("root"):
            options = qdisc.get("options", {})
            return Shaping(qdisc.get("kind", ""), int(options.get("rate", 0)) * 8 if "rate" in options else 0)
    return Shaping("", 0)


@dataclass(frozen=True)
class LinkBytes:
    """A host's bytes, counted at the router's end of its link since the rig was made."""

    sent: int  #: what the host sent (the router's end received)
    received: int  #: what the host received (the router's end sent)


def link_bytes(plan: RigPlan) -> dict[str, LinkBytes]:
    """Every host's bytes, read at once (one `ip` command)."""
    by_port = {}
    for link in json.loads(run("ip", "-j", "-s", "-n", plan.router, "link", "show") or "[]"):
        stats = link.get("stats64", {})
        by_port[link.get("ifname", "")] = LinkBytes(
            stats.get("rx", {}).get("bytes", 0), stats.get("tx", {}).get("bytes", 0)
        )
    return {host.name: by_port.get(host.router_port, LinkBytes(0, 0)) for host in plan.hosts}


def set_cut(plan: RigPlan, host: HostPlan, is_cut: bool) -> None:
    """Drop (or pass again) every frame to and from the host at the router: its link is cut, silently. Healed, the
    hosts forget their neighbours (a resolution that failed meanwhile, or is failing, would refuse connections with
    "No route to host" for a while), and resolve them again."""
    verb = "add" if is_cut else "delete"
    element = f"{{ {host.router_port} }}"
    run("ip", "netns", "exec", plan.router, "nft", verb, "element", "bridge", ROUTER_TABLE, "cut", element,
        check=is_cut)  # fmt: skip
    if not is_cut:
        for each in plan.hosts:
            run("ip", "-n", each.namespace, "neigh", "flush", "dev", "eth0", check=False)


def set_blocked(one: HostPlan, other: HostPlan, is_blocked: bool) -> None:
    """Each host's firewall drops (or passes again) what comes from or goes to the other."""
    verb = "add" if is_blocked else "delete"
    for host, peer in ((one, other), (other, one)):
        run("ip", "netns", "exec", host.namespace, "nft", verb, "element", "inet", HOST_TABLE, "blocked",
            f"{{ {peer.address} }}", check=is_blocked)  # fmt: skip
