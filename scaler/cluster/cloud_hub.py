"""`hub = "cloud"`: the launcher's side of a stack whose laptop opens no inbound port (docs/guide/bursting.md).

The scheduler and the object storage server run in a *hub*, one small unit of the file's first cloud manager's
kind (a Fargate task, an EC2 instance), tagged `<manager id>-hub`, started by the launcher and stopped with it.
Everything on the laptop dials out to it:

- the launcher binds the file's own addresses (scheduler, object storage, monitor) first, and a forwarder
  (`forwarder`) joins every connection made to them to the hub: clients, `scaler_top` and the managers keep
  connecting where the file says, so no user code changes between a local run and a burst;
- the workers reach the hub inside the cloud, at the address it reports (its boot report in the bucket);
- the laptop reaches it at that address too, unless it is a private (RFC 1918) one: then at the public IP AWS
  gave the unit (the hub's security group must let the laptop in on its three ports, 8516-8518 by default; the
  CURVE handshake refuses anyone without the stack's keys).

The stack's keys (`key_folder.stack_keys`) secure every connection; the hub gets the server's pair and the
authorised public keys in its one-time manifest. A hub already running for this file (a launcher restarted
within the lease) is adopted, not doubled; a hub that ends (its lease ran out while the laptop was away) is
launched again by the launcher's watch loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import json
import logging
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaler.cluster.cloud_units import backend_of, hub_settings
from scaler.cluster.hub_unit import (
    AUTHORIZED_VARIABLE,
    SERVER_KEY_VARIABLE,
    TLS_CERT_VARIABLE,
    TLS_KEY_VARIABLE,
)
from scaler.config.sections import SchedulerConfig, WorkerConfig, WorkerManagerSettings, section_to_json
from scaler.io.address import Address, parse_address
from scaler.io.child_processes import start_python_child
from scaler.io.port_owner import address_in_use_problem
from scaler.io.tunnel.front import front_addresses
from scaler.security.key_folder import KeyFolder

logger = logging.getLogger(__name__)

HUB_MODULE = "scaler.cluster.hub_unit"
POLL_SECONDS = 1.0
_PRIVATE = [ipaddress.ip_network(net) for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")]


@dataclass(frozen=True)
class HubAddresses:
    unit_id: str
    inside: str  #: where the workers reach the hub (its own address)
    laptop: str  #: where this machine reaches it
    scheduler_port: int
    storage_port: int
    monitor_port: int
    tunnel_port: int | None = None  #: where the hub serves its tunnel address (`[scaler] hub_address`), if any

    def inside_address(self, port: int) -> str:
        return f"tcp://{self.inside}:{port}"

    def tunnel_targets(self, hub_address: str) -> list[str]:
        """The scheduler's, object storage's and monitor's addresses at the hub's tunnel, as this machine reaches
        them: the host of `hub_address`, or the hub's laptop-side address for a wildcard one."""
        base = parse_address(hub_address)
        host = self.laptop if base.host in ("0.0.0.0", "*", "") else base.host
        return front_addresses(hub_address, host, self.tunnel_port)


class CloudHub:
    def __init__(self, manager: WorkerManagerSettings, scheduler: SchedulerConfig, keys: KeyFolder,
                 advertised_storage: str, hub_address: str | None = None) -> None:  # fmt: skip
        self._settings = hub_settings(manager, hub_address is not None and parse_address(hub_address).is_websocket)
        self._lease_seconds = float(getattr(manager, "lease_seconds", 300.0))
        self._boot_seconds = manager.boot_timeout_seconds
        port = parse_address(scheduler.bind_address).port or 8516
        program_settings = {
            "scheduler": json.loads(section_to_json(scheduler)),
            "port": port,
            "lease_seconds": self._lease_seconds,
        }
        environment = {
            SERVER_KEY_VARIABLE: (keys.folder / "server.key_secret").read_text(),
            AUTHORIZED_VARIABLE: json.dumps(keys.authorized_texts()),
        }
        if hub_address is not None:
            tunnel = parse_address(hub_address)
            program_settings["tunnel"] = str(Address(tunnel.scheme, "0.0.0.0", tunnel.port, tunnel.path))
            if tunnel.uses_tls and scheduler.tls_cert and scheduler.tls_key:
                environment[TLS_CERT_VARIABLE] = Path(scheduler.tls_cert).read_text()
                environment[TLS_KEY_VARIABLE] = Path(scheduler.tls_key).read_text()
        argv = ["-m", HUB_MODULE, json.dumps(program_settings)]

        def program(_spec: Any, _unit_id: str, _workers: int) -> tuple[list[str], dict[str, str], str | None]:
            return argv, environment, None

        self._program = program
        self._scheduler = dataclasses.replace(scheduler, advertised_object_storage_address=advertised_storage)
        self._backend: Any = None
        self.addresses: HubAddresses | None = None
        self.api_error = ""  #: how the cloud's API last failed to answer

    @property
    def hub_id(self) -> str:
        return self._settings.worker_manager_id

    @property
    def boot_seconds(self) -> float:
        """How long the hub may take to boot before the launcher gives up."""
        return float(self._boot_seconds)

    def start(self, interrupted: Callable[[], bool] = lambda: False) -> HubAddresses:
        """Adopt this file's running hub, or launch one, and wait until it reports its ports (the boot timeout;
        `interrupted()` true ends the wait: a signal)."""
        self._backend = backend_of(self._settings, self._program)
        self.addresses = asyncio.run(self._start(interrupted))
        return self.addresses

    async def _start(self, interrupted: Callable[[], bool]) -> HubAddresses:
        units = [unit for unit in await self._backend.list_units() if unit.is_alive]
        if units:
            newest = max(units, key=lambda unit: unit.created_at)
            logger.info("adopting the hub %s this file's launcher left running", newest.unit_id)
            extra = [unit.unit_id for unit in units if unit is not newest]
            if extra:
                await self._backend.terminate(extra, "a second hub of the same stack")
            unit_id = newest.unit_id
        else:
            spec = _hub_spec(self.hub_id)
            (unit_id,) = await self._backend.launch(1, spec)
            logger.info("launched the hub %s (%s)", unit_id, self.hub_id)
        return await self._wait(unit_id, interrupted)

    async def _wait(self, unit_id: str, interrupted: Callable[[], bool]) -> HubAddresses:
        deadline = time.monotonic() + self._boot_seconds
        detail = "no report yet"
        while time.monotonic() < deadline:
            if interrupted():
                raise RuntimeError(f"interrupted while the hub {unit_id} was starting")
            listed = {unit.unit_id: unit for unit in await self._backend.list_units()}
            unit = listed.get(unit_id)
            # prune=False: the listing above read the other units' reports (a failed hub of an earlier start); read
            # at each poll, the hub's ports are known within POLL_SECONDS of its report, not the listing's period
            report = (await self._backend.shipment.reports([unit_id], time.time(), prune=False,
                                                           period_seconds=0.0)).get(unit_id, {})  # fmt: skip
            if unit is not None and unit.detail:
                detail = unit.detail
            if isinstance(report.get("hub"), dict) and unit is not None and unit.is_alive:
                return await self._addresses(unit_id, report["hub"])
            if (unit is not None and not unit.is_alive) or report.get("state") in ("failed", "ended"):
                raise RuntimeError(f"the hub {unit_id} did not start: {detail}")
            await asyncio.sleep(POLL_SECONDS)
        await self._backend.terminate([unit_id], "the hub did not start within the boot timeout")
        raise RuntimeError(f"the hub {unit_id} did not start within {self._boot_seconds:g} s ({detail})")

    async def _addresses(self, unit_id: str, hub: dict[str, Any]) -> HubAddresses:
        inside = str(hub["address"])
        laptop = inside
        if _is_private(inside):
            public = await self._backend.public_address(unit_id)
            if public is None:
                raise RuntimeError(
                    f"the hub {unit_id} has only the private address {inside}: give its subnet public IPs "
                    "(assignPublicIp on ECS, a public subnet on EC2) so that this machine can reach it"
                )
            laptop = public
        tunnel = hub.get("tunnel_port")
        return HubAddresses(unit_id, inside, laptop, int(hub["scheduler_port"]), int(hub["storage_port"]),
                            int(hub["monitor_port"]), int(tunnel) if tunnel else None)  # fmt: skip

    @property
    def lease_seconds(self) -> float:
        """How long the hub and its units run on without a manager reaching them."""
        return self._lease_seconds

    def is_alive(self) -> bool | None:
        """Whether the hub unit still runs (asked of the cloud); None when the cloud's API does not answer
        (`api_error` says how)."""
        if self.addresses is None or self._backend is None:
            return False
        unit_id = self.addresses.unit_id
        try:
            units = asyncio.run(self._backend.list_units())
        except Exception as error:  # the cloud API unreachable (offline, the endpoint gone): not known
            self.api_error = f"{type(error).__name__}: {error}"
            return None
        return any(unit.unit_id == unit_id and unit.is_alive for unit in units)

    def stop(self) -> bool:
        """Terminate the hub; False (said in the log) when it could not be."""
        if self._backend is None:
            return True
        try:
            units = asyncio.run(self._backend.list_units())
            alive = [unit.unit_id for unit in units if unit.is_alive]
            if alive:
                asyncio.run(self._backend.terminate(alive, "the stack stopped"))
                logger.info("stopped the hub %s", ", ".join(alive))
        except Exception as error:
            logger.error("could not stop the hub (%s): `scaler FILE --down` stops what is left", error)
            return False
        return True


def _hub_spec(hub_id: str) -> Any:
    from scaler.worker_manager.backend import LaunchSpec

    return LaunchSpec(hub_id, WorkerConfig(scheduler_address="tcp://127.0.0.1:1", worker_type="HUB"))


def _is_private(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _PRIVATE)


class Listeners:
    """The file's addresses, bound here before the hub starts (a rehearsal's hub, on this machine, then binds
    others), and the forwarder that joins them to the hub."""

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        self._sockets: list[socket.socket] = []
        for address in addresses:
            parsed = parse_address(address)
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind((parsed.host, parsed.port or 0))
            except OSError as error:
                listener.close()
                self.close()
                taken = address_in_use_problem(address) or f"{address}: {error.strerror}"
                raise RuntimeError(f"cannot listen at the file's address {taken}") from None
            listener.listen(128)
            listener.set_inheritable(True)
            self._sockets.append(listener)
        self.forwarder: subprocess.Popen[bytes] | None = None

    def forward(self, targets: list[tuple[str, int]] | list[str], ca_file: str = "") -> subprocess.Popen[bytes]:
        """Start the forwarder: the i-th address to the i-th (host, port), or to the i-th tunnel address (wss://,
        tls://: through the environment's HTTP proxy, trusting `ca_file` besides the system's authorities)."""
        routes = [
            [sock.fileno(), target] if isinstance(target, str) else [sock.fileno(), target[0], target[1]]
            for sock, target in zip(self._sockets, targets, strict=True)
        ]
        fds = [sock.fileno() for sock in self._sockets]
        arguments = ["scaler.cluster.forwarder", json.dumps(routes), *([ca_file] if ca_file else [])]
        self.forwarder = start_python_child(arguments, pass_fds=fds)
        return self.forwarder

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()
