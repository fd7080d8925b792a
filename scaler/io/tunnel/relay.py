"""The process's tunnel relay: one thread running an event loop, made at the first tunnel address a socket of this
process binds or connects (`relay()`), and made anew in a forked child, where no thread of its parent's runs (the
child closes every connection and port it inherited from the parent's relay, so that they end when the parent ends
them).

- `serve(public, endpoint, ...)`: a ZeroMQ socket is bound at the private `endpoint` (an ipc path in a folder only
  this user may open); the relay listens at `public` and joins each connection it accepts (TLS and WebSocket done)
  to a fresh connection to the endpoint (`serving.Listener`).
- `dial(target)`: the private endpoint a ZeroMQ socket connects to instead of `target` (`dials.Dial`). A dial of a
  target not known to answer tries it first, for up to FIRST_TRY_WAIT_SECONDS: a failure that trying again cannot
  mend (a certificate that does not verify, a proxy that forbids it, a missing extra) raises `TunnelError` with its
  one line, and a connection made is kept for the socket about to connect.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import os
import selectors
import shutil
import socket
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from scaler.io.address import TUNNEL_SCHEMES, Address, AddressError, parse_address
from scaler.io.tunnel import TunnelError
from scaler.io.tunnel.dialing import DialFailure, websocket_module
from scaler.io.tunnel.dials import Dial
from scaler.io.tunnel.private_folder import private_folder
from scaler.io.tunnel.pump import ReadBuffer
from scaler.io.tunnel.serving import Listener, public_address
from scaler.io.tunnel.streams import Streams
from scaler.io.tunnel.tls import ServerCertificate, server_context

T = TypeVar("T")

#: How long a dial waits for its first try before the socket connects anyway (the try goes on, and a refusal it
#: meets is asked for by what waits for the server, `refusal`). A refusal comes within a few round trips (TCP,
#: the proxy's CONNECT, TLS, the upgrade): a second covers five of 200 ms, a link across the world.
FIRST_TRY_WAIT_SECONDS = 1.0


class TunnelRelay:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.folder = private_folder()
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._dials: dict[str, Dial] = {}
        self._listeners: dict[tuple[str, int], Listener] = {}
        self._streams = Streams()
        self._buffer = ReadBuffer()
        self._loop, self._selector = _new_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="scaler-tunnel-relay", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ servers

    def private_endpoint(self) -> str:
        """A fresh ipc endpoint in this process's private folder, for a socket to bind."""
        return f"ipc://{self.folder}/s{next(self._names)}"

    def serve(self, public: Address, endpoint: str, certificate: ServerCertificate | None, what: str) -> Address:
        """Carry the connections made to `public` to the ZeroMQ socket bound at `endpoint`; the public address served
        (its port the one bound). TunnelError (a port in use, a path served already, a missing extra) or
        TlsFileError (the certificate's files) when it cannot."""
        return self._call(self._serve(public, endpoint, certificate, what))

    async def _serve(self, public: Address, endpoint: str, certificate: ServerCertificate | None, what: str) -> Address:
        assert public.port is not None
        path = (public.path or "/") if public.is_websocket else "/"
        listener = self._listeners.get((public.host, public.port))
        if listener is None:
            listener, port = self._listen(public, certificate)
            self._listeners[(public.host, port)] = listener
        elif listener.scheme != public.scheme:
            raise TunnelError(f"cannot listen at {public}: this process serves {listener.scheme}:// at that port")
        else:
            port = public.port
        if path in listener.routes:
            raise TunnelError(f"cannot listen at {public}: another socket of this process is bound there")
        listener.routes[path] = endpoint
        listener.descriptions[path] = what
        return public_address(public.scheme, public.host, port, path)

    def _listen(self, public: Address, certificate: ServerCertificate | None) -> tuple[Listener, int]:
        if public.uses_tls and certificate is None:
            raise TunnelError(f"cannot listen at {public}: a TLS address needs the server's certificate and key (the "
                              "tls_cert and tls_key settings, PEM files)")  # fmt: skip
        try:
            websocket = websocket_module() if public.is_websocket else None
        except DialFailure as error:
            raise TunnelError(str(error)) from None
        context = server_context(certificate) if public.uses_tls and certificate is not None else None
        listener = Listener(public.scheme, context, websocket, self._streams, self._buffer)
        try:
            port = listener.start(public.host, public.port or 0)
        except OSError as error:
            raise TunnelError(f"cannot listen at {public}: {error.strerror or error}") from None
        return listener, port

    def withdraw(self, public: Address) -> None:
        """Stop serving `public` (its socket closes); the port is freed with its last path."""
        try:
            self._call(self._withdraw(public))
        except (RuntimeError, concurrent.futures.TimeoutError):  # the relay is stopping: its listeners end with it
            pass

    async def _withdraw(self, public: Address) -> None:
        key = (public.host, public.port or 0)
        listener = self._listeners.get(key)
        if listener is None:
            return
        listener.routes.pop((public.path or "/") if public.is_websocket else "/", None)
        if not listener.routes:
            del self._listeners[key]
            listener.close()

    # ------------------------------------------------------------ connecting sides

    def dial(self, target: Address) -> str:
        """The private endpoint to connect a ZeroMQ socket to instead of `target`. TunnelError when a first try
        fails for a reason that trying again does not mend."""
        endpoint, entry = self._call(self._dial(target))
        if entry.health.answering is True:
            return endpoint
        future = asyncio.run_coroutine_threadsafe(entry.try_once(), self._loop)
        try:
            failure = future.result(FIRST_TRY_WAIT_SECONDS)
        except concurrent.futures.TimeoutError:
            failure = None  # the try goes on; the socket connects, and waits for it
        if failure is not None and failure.permanent:
            raise TunnelError(str(failure))
        return endpoint

    async def _dial(self, target: Address) -> tuple[str, Dial]:
        key = str(target)
        entry = self._dials.get(key)
        if entry is None:
            path = f"{self.folder}/d{next(self._names)}"
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(path)
                listener.listen(socket.SOMAXCONN)
            except BaseException:
                listener.close()
                raise
            entry = Dial(target, listener, self._streams, self._buffer, f"ipc://{path}")
            with self._lock:
                self._dials[key] = entry
        return entry.endpoint, entry

    def forward(self, listener: socket.socket, target: Address) -> None:
        """Join each connection accepted on `listener` (a listening TCP socket of this process) to a new public
        connection to `target`, as a dial's: a forwarder's route to a tunnel address."""
        self._call(self._forward(listener, target))

    async def _forward(self, listener: socket.socket, target: Address) -> None:
        entry = Dial(target, listener, self._streams, self._buffer, f"forwarded from {listener.getsockname()}")
        with self._lock:
            self._dials[f"forward {listener.fileno()} {target}"] = entry

    def refusal(self, target: Address) -> str | None:
        with self._lock:
            entry = self._dials.get(str(target))
        return entry.health.refused if entry is not None else None

    # ------------------------------------------------------------ lifetime

    def _call(self, coroutine: Coroutine[Any, Any, T], timeout_seconds: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_seconds)

    def close(self) -> None:
        """Stop listening and carrying; remove the private folder."""
        if self._loop.is_running():
            try:
                self._call(self._close(), 5.0)
            except (RuntimeError, concurrent.futures.TimeoutError):
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5.0)
        shutil.rmtree(self.folder, ignore_errors=True)

    async def _close(self) -> None:
        for listener in self._listeners.values():
            listener.close()
        for entry in self._dials.values():
            entry.close()
        for stream in self._streams:
            stream.close()
        self._listeners.clear()

    def close_inherited(self) -> None:
        """In a forked child, where the relay's thread does not run: close the ports, private endpoints and
        connections inherited from the parent here, and nothing in the parent (its connections go on; a connection
        ends when the last process holding it closes it, so the child must not hold the parent's)."""
        for listener in self._listeners.values():
            listener.close_inherited()
        for entry in self._dials.values():
            entry.acceptor.sock.close()
        self._streams.close_inherited()
        if self._selector is not None:
            self._selector.close()


def _new_loop() -> tuple[asyncio.AbstractEventLoop, selectors.BaseSelector | None]:
    """uvloop's loop where it is installed (its reader callbacks cost the relay a third less CPU per pass than
    asyncio's own, docs/performance.md), else asyncio's with its selector (closed in a forked child)."""
    try:
        import uvloop
    except ImportError:
        selector = selectors.DefaultSelector()
        return asyncio.SelectorEventLoop(selector), selector
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop, None


_relay: TunnelRelay | None = None
_relay_lock = threading.Lock()
#: Relays inherited from a parent in a forked child: kept so that the loop and sockets they hold are never finalised
#: here (their descriptors are closed by `close_inherited`).
_inherited: list[TunnelRelay] = []


def relay() -> TunnelRelay:
    """This process's relay, made at first use."""
    global _relay
    with _relay_lock:
        if _relay is None or _relay.pid != os.getpid():
            _relay = TunnelRelay()
        return _relay


def refusal(address: str) -> str | None:
    """Why this process cannot reach the tunnel address `address` as long as nothing changes (a certificate that does
    not verify, a proxy that forbids it), while its last try failed so; None otherwise (a ZeroMQ address, a target
    that answers or is only down). What waits for a server at such an address asks it, to fail with the reason."""
    current = _relay
    if current is None or current.pid != os.getpid() or address.partition("://")[0] not in TUNNEL_SCHEMES:
        return None
    try:
        return current.refusal(parse_address(address))
    except AddressError:
        return None


def _stop_at_exit() -> None:
    if _relay is not None and _relay.pid == os.getpid():
        _relay.close()


def _forget_in_child() -> None:
    """After a fork: the parent's relay has no thread here; what it holds is closed here (the ports and connections
    stay the parent's), and a tunnel address used here makes a relay of this process."""
    global _relay, _relay_lock
    _relay_lock = threading.Lock()
    inherited, _relay = _relay, None
    if inherited is None:
        return
    _inherited.append(inherited)
    inherited.close_inherited()


atexit.register(_stop_at_exit)
if hasattr(os, "register_at_fork"):  # absent where there is no fork (Windows), and so no forked child
    os.register_at_fork(after_in_child=_forget_in_child)
