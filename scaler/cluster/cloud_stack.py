"""What `[scaler] hub = "cloud"` changes in a `scaler FILE` stack (see `cloud_hub` for the design).

Instead of starting object storage and the scheduler here, the launcher binds the file's addresses, starts (or
adopts) the hub in the cloud, joins the addresses to it with a forwarder, registers the stack's client keys for
those addresses (local clients and `scaler_top` find them), and hands the managers a file in which the workers'
scheduler and object storage are the hub's inside addresses and every key is the stack's own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from scaler.cluster.cloud_hub import CloudHub, HubAddresses, Listeners
from scaler.cluster.cloud_units import cloud_managers
from scaler.cluster.readiness import wait_for_scheduler
from scaler.config.loader import LauncherFile
from scaler.config.sections import StackSecurityConfig, WorkerManagerSettings
from scaler.io.address import TUNNEL_SCHEMES, AddressError, parse_address
from scaler.io.tunnel.tls import TlsFileError
from scaler.security.connection_files import (
    MONITOR_SERVICE,
    SCHEDULER_SERVICE,
    STORAGE_SERVICE,
    register_connection,
    unregister_connection,
)
from scaler.security.curve import CurveSecurity, curve_security
from scaler.security.key_folder import stack_keys
from scaler.security.tls_settings import server_certificate

logger = logging.getLogger(__name__)

READY_TIMEOUT_SECONDS = 60.0
#: How often the launcher asks the cloud whether the hub still runs.
HUB_CHECK_SECONDS = 10.0


def stack_name(path: str) -> str:
    """The folder name of a file's stack keys: its name and a digest of its absolute path."""
    absolute = os.path.abspath(path)
    return f"{Path(absolute).stem}-{hashlib.sha256(absolute.encode()).hexdigest()[:10]}"


class CloudStack:
    def __init__(self, file: LauncherFile, path: str) -> None:
        problem = cloud_stack_problem(file)
        if problem is not None:
            raise ValueError(problem)
        assert file.scheduler is not None
        self._file = file
        self.keys = stack_keys(stack_name(path))
        scheduler = parse_address(file.scheduler.bind_address).connectable()
        self.scheduler_address = str(scheduler)
        storage = (file.object_storage_server.bind_address if file.object_storage_server is not None
                   else file.scheduler.object_storage_address or str(scheduler.with_port_offset(1)))  # fmt: skip
        self.storage_address = str(parse_address(storage).connectable())
        self.monitor_address = str(
            parse_address(file.scheduler.monitor_address or str(scheduler.with_port_offset(2))).connectable()
        )
        self._listeners = Listeners([self.scheduler_address, self.storage_address, self.monitor_address])
        self._hub_address = file.launcher.hub_address
        self._hub = CloudHub(
            cloud_managers(file)[0], file.scheduler, self.keys, self.storage_address, self._hub_address
        )
        self.hub: HubAddresses | None = None
        self._checked_at = 0.0
        self._silent_since: float | None = None  #: since when the cloud's API has not answered
        self.cloud_lost = False  #: the cloud's API did not answer for the hub's lease: the stack stops without it

    @property
    def _services(self) -> dict[str, str]:
        return {
            SCHEDULER_SERVICE: self.scheduler_address,
            STORAGE_SERVICE: self.storage_address,
            MONITOR_SERVICE: self.monitor_address,
        }

    @property
    def client_security(self) -> CurveSecurity:
        security = curve_security(self.keys.path("client.key_secret"), self.keys.path("server.key"))
        assert security is not None
        return security

    def start(self, interrupted: Callable[[], bool]) -> LauncherFile:
        """Start the hub and the forwarder; the file the launcher then starts (managers and dashboard only)."""
        # published before the hub boots: a client or scaler_top started meanwhile waits for the stack, and then
        # connects with its keys (docs/guide/bursting.md)
        starting_until = time.time() + self._hub.boot_seconds + READY_TIMEOUT_SECONDS
        register_connection(self._services, self.keys, ship_local_modules=True, starting_until=starting_until)
        hub = self.hub = self._hub.start(interrupted)
        self._forward(hub)
        wait_for_scheduler(self.scheduler_address, READY_TIMEOUT_SECONDS, security=self.client_security)
        register_connection(self._services, self.keys, ship_local_modules=True)  # the stack is up
        print(f"scaler: hub {hub.unit_id} in the cloud at {hub.laptop} (inside: {hub.inside}); scheduler at "
              f"{self.scheduler_address}, object storage at {self.storage_address}, monitor at {self.monitor_address}"
              " through this machine's forwarder", flush=True)  # fmt: skip
        security = StackSecurityConfig(
            server_secret_key=self.keys.path("server.key_secret"), server_public_key=self.keys.path("server.key"),
            authorized_keys=self.keys.path("authorized"), workers_secret_key=self.keys.path("workers.key_secret"),
        )  # fmt: skip
        managers = tuple(self._pointed_at_hub(manager, hub) for manager in self._file.worker_managers)
        return dataclasses.replace(
            self._file, object_storage_server=None, scheduler=None, worker_managers=managers, security=security
        )

    def _forward(self, hub: HubAddresses) -> None:
        if self._hub_address is not None and hub.tunnel_port is not None:
            assert self._file.scheduler is not None
            self._listeners.forward(hub.tunnel_targets(self._hub_address), self._file.scheduler.tls_ca or "")
            return
        ports = (hub.scheduler_port, hub.storage_port, hub.monitor_port)
        self._listeners.forward([(hub.laptop, port) for port in ports])

    def _pointed_at_hub(self, manager: WorkerManagerSettings, hub: HubAddresses) -> WorkerManagerSettings:
        """The manager connects through the forwarder (the file's address); its workers straight to the hub."""
        return dataclasses.replace(
            manager,
            worker_scheduler_address=hub.inside_address(hub.scheduler_port),
            object_storage_address=hub.inside_address(hub.storage_port),
        )

    def problem(self, now: bool = False) -> str | None:
        """Why the stack cannot go on (the hub ended), or None; a forwarder that died is started again. The cloud
        is asked at most every HUB_CHECK_SECONDS, or `now`."""
        forwarder = self._listeners.forwarder
        if forwarder is not None and forwarder.poll() is not None and self.hub is not None:
            logger.warning("the forwarder exited (code %s): starting it again", forwarder.returncode)
            self._forward(self.hub)
        checked_at = time.monotonic()
        if not now and checked_at - self._checked_at < HUB_CHECK_SECONDS:
            return None
        self._checked_at = checked_at
        alive = self._hub.is_alive()
        if alive is None:
            return self._cloud_silent(checked_at)
        if self._silent_since is not None:
            logger.info("the cloud's API answers again")
            self._silent_since = None
        if not alive:
            return (
                "the hub in the cloud ended: its lease ran out while no worker manager could reach it (this machine "
                "asleep or cut off longer than lease_seconds), or it failed; its units end with it. Run the stack "
                "again to start a new one"
            )
        return None

    @property
    def cloud_silent(self) -> bool:
        """The cloud's API did not answer when last asked."""
        return self._silent_since is not None

    def _cloud_silent(self, now: float) -> str | None:
        """The cloud's API did not answer: said once; past the hub's lease, why the stack stops (the hub and its
        units, which no manager can reach or stop without it, end by their lease)."""
        lease = self._hub.lease_seconds
        if self._silent_since is None:
            self._silent_since = now
            logger.warning(
                "the cloud's API does not answer (%s): this machine is offline, or the endpoint is gone; the stack "
                "waits for it up to the hub's lease (%g s), then stops", self._hub.api_error, lease,
            )  # fmt: skip
            return None
        if now - self._silent_since < lease:
            return None
        return self._lost(f"the cloud's API has not answered for {lease:g} s, the hub's lease")

    def lost_with(self, child: str, now: float) -> str | None:
        """Why the stack stops when `child` (a worker manager) ended while the cloud's API is silent, or None when it
        answers: the cloud is lost. The manager gave up on the hub it reaches through the cloud, which went with the
        API (their silences began together, the manager's a check earlier than this one's), before the hub's lease
        ran out here."""
        if self._silent_since is None:
            return None
        return self._lost(f"the cloud's API has not answered for {now - self._silent_since:.0f} s and {child} gave up "
                          "on the hub it reaches through it")  # fmt: skip

    def _lost(self, what: str) -> str:
        self.cloud_lost = True
        return (
            f"{what} ({self._hub.api_error}): the hub and its units end by themselves when no worker manager reaches "
            "them for the hub's lease; stopping the stack. Once the cloud answers again, `scaler FILE --down` ends "
            "whatever is left"
        )

    def stop_forwarder(self) -> None:
        forwarder = self._listeners.forwarder
        if forwarder is not None and forwarder.poll() is None:
            forwarder.terminate()
            try:
                forwarder.wait(5)
            except subprocess.TimeoutExpired:  # a stopped one (SIGSTOP) ignores SIGTERM until resumed
                forwarder.kill()
                forwarder.wait(10)

    def stop(self) -> bool:
        """After the managers have stopped their units: the forwarder, the hub, the connection files. False when
        the hub could not be stopped (the log says why); the hub of a lost cloud is not asked (`cloud_lost`)."""
        self.stop_forwarder()
        self._listeners.close()
        unregister_connection([self.scheduler_address, self.storage_address, self.monitor_address])
        return True if self.cloud_lost else self._hub.stop()  # a lost cloud: said already, `--down` named


def cloud_stack_problem(file: LauncherFile) -> str | None:
    """Why this file cannot run with its scheduler in the cloud, or None."""
    if file.launcher.hub != "cloud":
        return '[scaler] hub_address needs hub = "cloud"' if file.launcher.hub_address else None
    if file.scheduler is None:
        return 'hub = "cloud" needs a [scheduler] section (its settings run in the hub)'
    if not cloud_managers(file):
        return 'hub = "cloud" needs an aws_raw_ecs or orb_aws_ec2 [[worker_manager]] (the hub is one of its units)'
    if file.security is not None:
        return 'hub = "cloud" makes and distributes the stack\'s own keys: remove the [security] section'
    bound = [file.scheduler.bind_address, file.scheduler.object_storage_address, file.scheduler.monitor_address]
    tunnelled = [address for address in bound if address and address.partition("://")[0] in TUNNEL_SCHEMES]
    if tunnelled:
        return (
            f'[scheduler] {tunnelled[0]}: with hub = "cloud" this machine listens at tcp:// addresses (its forwarder '
            "to the hub) and cannot bind a tls://, ws:// or wss:// one; the hub's own such address is [scaler] "
            "hub_address"
        )
    return hub_address_problem(file)


def hub_address_problem(file: LauncherFile) -> str | None:
    """Why `[scaler] hub_address` cannot be used, or None: it is a tunnel address, and a TLS one has a certificate
    to present (checked here: the hub would fail with it far away)."""
    address = file.launcher.hub_address
    if address is None:
        return None
    try:
        parsed = parse_address(address)
    except AddressError as error:
        return f"[scaler] hub_address: {error}"
    if not parsed.is_tunnel:
        return f"[scaler] hub_address {address} is not a tls://, ws:// or wss:// address (leave it out: the tcp ports)"
    assert file.scheduler is not None
    try:
        if parsed.uses_tls and server_certificate(file.scheduler) is None:
            return (
                f"[scaler] hub_address {address} is a TLS address: give [scheduler] tls_cert and tls_key, the "
                'certificate the hub presents (docs/guide/bursting.md, "Through an HTTPS proxy")'
            )
    except TlsFileError as error:
        return f"[scheduler] {error}"
    return None
