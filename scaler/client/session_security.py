"""Where a client connects and how its connections are secured, resolved once per session (docs/guide/security.md).

The sources, first match wins: CURVE key files given to the Client (`curve_secret_key`, `curve_server_key`); a
`TransportSecurity` given to it; inside a task, the worker's; else what every connecting side uses for an address
(`io.default_security.connecting_security`: key settings or key text variables, the address's live connection
file, the user's keys for a local address, plain TCP). The connection file also says whether the functions of the
user's own modules travel by value (`ship_local_modules`, a cloud stack's workers run elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.io.address import validate_address
from scaler.io.sockets import TransportSecurity
from scaler.payload import processor_context


@dataclass(frozen=True)
class Connecting:
    """A session's resolved address and security."""

    address: str  #: the scheduler's
    security: TransportSecurity | None  #: None: plain TCP
    ship_local_modules: bool = False


def resolve_connection(
    address: str | None,
    security: TransportSecurity | None = None,
    curve_secret_key: str | None = None,
    curve_server_key: str | None = None,
) -> Connecting:
    """The one resolution of a client's address and security (see the module's docstring). ValueError for no address
    outside a task."""
    context = processor_context.current()
    if curve_secret_key is not None or curve_server_key is not None:
        from scaler.io.curve import curve_security

        security = curve_security(curve_secret_key, curve_server_key)
    if security is None and context is not None:
        security = context.security
    ship_local_modules = False
    if security is None and context is None and address is not None:
        from scaler.io.default_security import connecting_security
        from scaler.io.stack_keys import discovered_connection

        security = connecting_security({}, address, "client")
        ship_local_modules = bool((discovered_connection(address) or {}).get("ship_local_modules"))
    if address is None:
        if context is None:
            raise ValueError(
                "Client() needs the scheduler's address, e.g. Client(address='tcp://127.0.0.1:8516'); "
                "only a Client created inside a task finds its scheduler by itself"
            )
        address = context.scheduler_address
    return Connecting(validate_address(address), security, ship_local_modules)
