"""`python -m scaler.cluster.hub_unit '<settings as JSON>'`: the scheduler and the object storage server of a stack
whose laptop opens no inbound port (`hub = "cloud"`), run in a small cloud unit the launcher starts and stops.

The laptop dials out to it (its managers and clients, through the launcher's forwarders); the workers reach it
inside the cloud. Every port is CURVE-secured with the stack's keys, which arrive in the unit's environment from
its one-time manifest (`SCALER_HUB_SERVER_KEY_TEXT`, the servers' secret key file; `SCALER_HUB_AUTHORIZED`, the
authorised public keys by relative path) and are written to a private folder here.

It binds the ports it is asked for when they are free, others when not (a rehearsal runs it beside the
launcher's own listeners), and tells the launcher which, and at what address it sees itself, in the unit's boot
report.

Its lease: the hub ends once no worker manager has been connected to its scheduler for `lease_seconds`, the
managers being the laptop's side (a laptop that sleeps, loses its network or is killed leaves no manager). Until the
first manager came, it waits at least FIRST_MANAGER_SECONDS: the laptop starts its managers only once the hub reported
ready, and a busy laptop may take longer than a short lease to start one (`lease_over`). Its scheduler's end closes
the workers' connections, and the workers' units end in turn (their own lease).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scaler.cluster.readiness import wait_for_scheduler
from scaler.config.sections import ObjectStorageServerConfig, SchedulerConfig, section_from_json, section_to_json
from scaler.io.child_processes import describe_exit, start_python_child, stop_children
from scaler.io.tunnel.front import serve_front
from scaler.io.tunnel.tls import ServerCertificate
from scaler.monitor.feed import FeedReader
from scaler.object_storage.readiness import wait_for_object_storage
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC
from scaler.security.curve import CurveSecurity
from scaler.security.key_files import read_key_pair
from scaler.worker_manager.unit.report import UnitReporter

logger = logging.getLogger("scaler.hub")

SERVER_KEY_VARIABLE = "SCALER_HUB_SERVER_KEY_TEXT"
AUTHORIZED_VARIABLE = "SCALER_HUB_AUTHORIZED"
#: The certificate and key (PEM text) of the hub's tunnel address (`[scaler] hub_address` with TLS).
TLS_CERT_VARIABLE = "SCALER_HUB_TLS_CERT_TEXT"
TLS_KEY_VARIABLE = "SCALER_HUB_TLS_KEY_TEXT"
READY_TIMEOUT_SECONDS = 60.0


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s hub %(levelname)s %(message)s")
    sys.exit(run_hub(json.loads(sys.argv[1])))


def run_hub(settings: dict[str, Any]) -> int:
    folder = Path(tempfile.mkdtemp(prefix="scaler-hub-keys-"))
    os.chmod(folder, 0o700)
    stopping: list[str] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda number, _frame: stopping.append(signal.Signals(number).name))
    try:
        server_key, authorized = _write_keys(folder)
        ports = free_ports(int(settings.get("port", 8516)))
        storage, scheduler = _sections(settings, ports, server_key, authorized)
        public, secret = read_key_pair(server_key)
        probe = CurveSecurity(public, secret, public)  # the servers' own pair may probe them
        children = _start_servers(storage, scheduler, ports, probe)
        address = own_address()
        hub = {"address": address, "scheduler_port": ports[0], "storage_port": ports[1], "monitor_port": ports[2]}
        if settings.get("tunnel"):
            endpoints = (f"tcp://127.0.0.1:{ports[0]}", f"tcp://127.0.0.1:{ports[1]}", f"tcp://127.0.0.1:{ports[2]}")
            hub["tunnel_port"] = serve_front(str(settings["tunnel"]), endpoints, _write_certificate(folder))
            logger.info("hub serving %s (scheduler, object storage, monitor)", settings["tunnel"])
        UnitReporter.from_environment().send(state="running", hub=hub)
        logger.info("hub ready at %s: scheduler %d, object storage %d, monitor %d", address, *ports)
        try:
            return _keep(float(settings["lease_seconds"]), ports[2], probe, children, stopping)
        finally:
            stop_children(list(reversed(children)), 10.0)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _start_servers(
    storage: ObjectStorageServerConfig, scheduler: SchedulerConfig, ports: tuple[int, int, int], probe: CurveSecurity
) -> list[Any]:
    """The object storage server and the scheduler, started side by side (each takes seconds to import and bind; the
    scheduler waits for the storage itself), once both answer; neither is left running when one fails to start."""
    children = [
        start_python_child(["scaler.object_storage.server", section_to_json(storage)]),
        start_python_child(["scaler.scheduler.process", section_to_json(scheduler)]),
    ]
    try:
        wait_for_object_storage(f"tcp://127.0.0.1:{ports[1]}", READY_TIMEOUT_SECONDS, children, security=probe)
        wait_for_scheduler(f"tcp://127.0.0.1:{ports[0]}", READY_TIMEOUT_SECONDS, children, security=probe)
    except BaseException:
        stop_children(list(reversed(children)), 10.0)
        raise
    return children


#: The least a hub waits for its first worker manager, whatever its lease (the laptop starts its managers once the
#: hub reported ready: a Python process that imports boto3 and dials in through the launcher's forwarder).
FIRST_MANAGER_SECONDS = 120.0


def lease_over(silent_seconds: float, lease_seconds: float, manager_seen: bool) -> bool:
    """Whether the hub's lease is over, no manager connected for `silent_seconds` (since the hub was ready, when none
    came yet: then it waits FIRST_MANAGER_SECONDS at least)."""
    return silent_seconds > (lease_seconds if manager_seen else max(lease_seconds, FIRST_MANAGER_SECONDS))


def _keep(
    lease_seconds: float, monitor_port: int, probe: CurveSecurity, children: list[Any], stopping: list[str]
) -> int:
    """Watch the scheduler's feed until the lease ends (no manager for `lease_seconds`), a child dies, or a signal."""
    reader = FeedReader(f"tcp://127.0.0.1:{monitor_port}", topics=(STATUS_TOPIC,), security=probe)
    last_manager, manager_seen = time.monotonic(), False
    try:
        while not stopping:
            message = reader.receive(1.0)
            now = time.monotonic()
            if isinstance(message, m.StatusSnapshot) and message.managers:
                last_manager, manager_seen = now, True
            if lease_over(now - last_manager, lease_seconds, manager_seen):
                logger.warning(
                    "no worker manager has been connected for %g s (the laptop is gone, asleep or cut off): the "
                    "hub's lease is over, it stops", round(now - last_manager),
                )  # fmt: skip
                return 0
            for child in children:
                if child.poll() is not None:
                    logger.error("a hub process (pid %d) exited: %s", child.pid, describe_exit(child.returncode))
                    return 1
        logger.info("received %s: stopping", stopping[0])
        return 0
    finally:
        reader.close()


def _write_certificate(folder: Path) -> ServerCertificate | None:
    cert, key = os.environ.get(TLS_CERT_VARIABLE), os.environ.get(TLS_KEY_VARIABLE)
    if not cert or not key:
        return None
    cert_path, key_path = folder / "tls.pem", folder / "tls.key"
    cert_path.write_text(cert)
    key_path.write_text(key)
    os.chmod(key_path, 0o600)
    return ServerCertificate(str(cert_path), str(key_path))


def _write_keys(folder: Path) -> tuple[str, str]:
    server = folder / "server.key_secret"
    server.write_text(os.environ[SERVER_KEY_VARIABLE])
    os.chmod(server, 0o600)
    authorized = folder / "authorized"
    for relative, text in json.loads(os.environ[AUTHORIZED_VARIABLE]).items():
        path = authorized / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(server), str(authorized)


def _sections(
    settings: dict[str, Any], ports: tuple[int, int, int], server_key: str, authorized: str
) -> tuple[ObjectStorageServerConfig, SchedulerConfig]:
    scheduler = section_from_json(SchedulerConfig, json.dumps(settings["scheduler"]))
    storage = ObjectStorageServerConfig(
        bind_address=f"tcp://0.0.0.0:{ports[1]}", logging_level=scheduler.logging_level,
        curve_secret_key=server_key, curve_authorized_keys=authorized,
    )  # fmt: skip
    scheduler = dataclasses.replace(
        scheduler,
        bind_address=f"tcp://0.0.0.0:{ports[0]}",
        object_storage_address=f"tcp://127.0.0.1:{ports[1]}",
        monitor_address=f"tcp://0.0.0.0:{ports[2]}",
        logging_paths=("/dev/stdout",),
        logging_config_file=None,
        curve_secret_key=server_key,
        curve_authorized_keys=authorized,
        tls_cert=None,  # the laptop's paths: the hub's tunnel has the certificate (TLS_CERT_VARIABLE)
        tls_key=None,
        tls_ca=None,
    )
    return storage, scheduler


def free_ports(preferred: int) -> tuple[int, int, int]:
    """`preferred`, +1, +2 when all three are free on every interface; else three free ports."""
    if all(_free(port) for port in (preferred, preferred + 1, preferred + 2)):
        return preferred, preferred + 1, preferred + 2
    found: list[int] = []
    while len(found) < 3:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("0.0.0.0", 0))
            port = int(probe.getsockname()[1])
        if port not in found and _free(port + 0):
            found.append(port)
    return found[0], found[1], found[2]


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def own_address() -> str:
    """The address this unit is seen at inside its network: the one its route to the AWS endpoint leaves from
    (no packet is sent: a UDP socket's connect only picks the route)."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
    host = endpoint.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]") if endpoint else ""
    target = host or "192.0.2.1"  # TEST-NET: any routable-looking address picks the default route
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((socket.gethostbyname(target), 9))
            return str(probe.getsockname()[0])
        except OSError:
            return socket.gethostbyname(socket.gethostname())


if __name__ == "__main__":
    main()
