"""The process's tunnel relay: one thread running an asyncio loop, made at the first tunnel address a socket of this
process binds or connects (`relay()`), and made anew in a forked child, where no thread of its parent's runs.

- `serve(public, endpoint, ...)`: a ZeroMQ socket is bound at the private `endpoint` (an ipc path in a folder only
  this user may open); the relay listens at `public` and joins each connection it accepts (TLS and WebSocket done)
  to a fresh connection to the endpoint.
- `dial(target)`: the private endpoint a ZeroMQ socket connects to instead of `target`; each connection ZeroMQ makes
  there is joined to a new public connection to `target` (`dialing.open_public`). While the target cannot be
  reached, the relay keeps ZeroMQ's connection waiting and tries again, doubling its delay up to a few seconds, so
  ZeroMQ sees a slow peer, never a failed handshake; what goes wrong is logged once per change. The first dial of a
  target in a process tries it at once: a failure that trying again cannot mend (a certificate that does not verify,
  a proxy that forbids it, a missing extra) raises `TunnelError` with its one line, and a connection made is kept
  for the socket about to connect.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from scaler.io.address import TUNNEL_SCHEMES, Address, AddressError, parse_address
from scaler.io.tunnel import TunnelError
from scaler.io.tunnel.dialing import DialFailure, open_public, websocket_module
from scaler.io.tunnel.links import Link
from scaler.io.tunnel.serving import Listener, public_address
from scaler.io.tunnel.tls import ServerCertificate, server_context

logger = logging.getLogger("scaler.io.tunnel")

T = TypeVar("T")

#: A target that could not be reached is tried again after this long, doubling up to the maximum.
RETRY_FIRST_SECONDS = 0.05
RETRY_MAX_SECONDS = 2.0
#: How long a target may not answer before it is said (a server starting after its peers is no news).
QUIET_SECONDS = 5.0
#: How long a dial waits for its first try before the socket connects anyway (the try goes on).
FIRST_TRY_WAIT_SECONDS = 3.0
#: How long a connection made by a dial's first try waits for the socket that asked for it.
SPARE_SECONDS = 5.0
_FOLDER_PREFIX = "scaler-tunnel-"


class DialHealth:
    """Whether a target answers, said once per change: `failed` and `answered` return the line to log when there is
    one to say (None otherwise); `delay` is the wait before the next try. A target that does not answer is said only
    once it has not for QUIET_SECONDS (a server starting after its peers is no news); one that refuses for good
    (`DialFailure.permanent`) at once."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.answering: bool | None = None  #: None: never tried
        self.delay = RETRY_FIRST_SECONDS
        self._failing_since: float | None = None
        self._said: str | None = None  #: the failure said last (None: none said since it last answered)
        self.refused: str | None = None  #: the last try's failure, when trying again does not mend it

    def failed(self, failure: DialFailure, now: float) -> str | None:
        self.answering = False
        self.refused = str(failure) if failure.permanent else None
        self.delay = min(RETRY_MAX_SECONDS, self.delay * 2)
        if self._failing_since is None:
            self._failing_since = now
        text = str(failure)
        if text == self._said or (not failure.permanent and now - self._failing_since < QUIET_SECONDS):
            return None
        self._said = text
        return text if failure.permanent else f"{text} (tried again until it answers)"

    def answered(self) -> str | None:
        said, self._said, self._failing_since, self.refused = self._said, None, None, None
        self.answering, self.delay = True, RETRY_FIRST_SECONDS
        return f"{self.target} answers again" if said is not None else None


class _Dial:
    """The private endpoint that stands for one target in this process."""

    def __init__(self, target: Address, endpoint: str) -> None:
        self.target = target
        self.endpoint = endpoint
        self.health = DialHealth(str(target))
        self.server: asyncio.AbstractServer | None = None
        self.spare: tuple[Link, bytes] | None = None

    def take_spare(self) -> tuple[Link, bytes] | None:
        spare, self.spare = self.spare, None
        if spare is not None and spare[0].closed.done():
            return None
        return spare


class TunnelRelay:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.folder = _private_folder()
        self._names = itertools.count()
        self._lock = threading.Lock()
        self._dials: dict[str, _Dial] = {}
        self._listeners: dict[tuple[str, int], Listener] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
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
            listener, port = await self._listen(public, certificate)
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

    async def _listen(self, public: Address, certificate: ServerCertificate | None) -> tuple[Listener, int]:
        if public.uses_tls and certificate is None:
            raise TunnelError(f"cannot listen at {public}: a TLS address needs the server's certificate and key (the "
                              "tls_cert and tls_key settings, PEM files)")  # fmt: skip
        try:
            websocket = websocket_module() if public.is_websocket else None
        except DialFailure as error:
            raise TunnelError(str(error)) from None
        context = server_context(certificate) if public.uses_tls and certificate is not None else None
        listener = Listener(public.scheme, context, websocket)
        try:
            port = await listener.start(public.host, public.port or 0)
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
        entry = self._call(self._dial(target))
        if entry.health.answering is True:
            return entry.endpoint
        future = asyncio.run_coroutine_threadsafe(self._first_try(entry), self._loop)
        try:
            failure = future.result(FIRST_TRY_WAIT_SECONDS)
        except concurrent.futures.TimeoutError:
            failure = None  # the try goes on; the socket connects, and waits for it
        if failure is not None and failure.permanent:
            raise TunnelError(str(failure))
        return entry.endpoint

    async def _dial(self, target: Address) -> _Dial:
        key = str(target)
        entry = self._dials.get(key)
        if entry is None:
            path = f"{self.folder}/d{next(self._names)}"
            entry = _Dial(target, f"ipc://{path}")
            made = entry

            def accepted() -> Link:
                return Link(on_made=lambda inner: self._carry(made, inner))

            entry.server = await self._loop.create_unix_server(accepted, path)
            with self._lock:
                self._dials[key] = entry
        return entry

    def forward(self, listener: socket.socket, target: Address) -> None:
        """Join each connection accepted on `listener` (a listening TCP socket of this process) to a new public
        connection to `target`, as a dial's: a forwarder's route to a tunnel address."""
        self._call(self._forward(listener, target))

    async def _forward(self, listener: socket.socket, target: Address) -> None:
        entry = _Dial(target, f"forwarded from {listener.getsockname()}")

        def accepted() -> Link:
            return Link(on_made=lambda inner: self._carry(entry, inner))

        entry.server = await self._loop.create_server(accepted, sock=listener)
        with self._lock:
            self._dials[f"forward {listener.fileno()} {target}"] = entry

    async def _first_try(self, entry: _Dial) -> DialFailure | None:
        try:
            opened = await open_public(entry.target)
        except DialFailure as failure:
            line = entry.health.failed(failure, time.monotonic())
            if not failure.permanent:  # a permanent one is raised to the caller, which says it
                self._log(line, failure)
            return failure
        self._log(entry.health.answered(), None)
        previous, entry.spare = entry.spare, opened
        if previous is not None:
            previous[0].close()
        self._loop.call_later(SPARE_SECONDS, self._expire_spare, entry, opened[0])
        return None

    def _expire_spare(self, entry: _Dial, link: Link) -> None:
        if entry.spare is not None and entry.spare[0] is link:
            entry.spare = None
            link.close()

    def _carry(self, entry: _Dial, inner: Link) -> None:
        task = self._loop.create_task(self._join(entry, inner))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _join(self, entry: _Dial, inner: Link) -> None:
        assert inner.transport is not None
        inner.transport.pause_reading()  # ZeroMQ's greeting waits in the socket until there is somewhere to send it
        opened = entry.take_spare()
        while opened is None:
            try:
                opened = await open_public(entry.target)
                self._log(entry.health.answered(), None)
            except DialFailure as failure:
                self._log(entry.health.failed(failure, time.monotonic()), failure)
                await asyncio.wait([inner.closed], timeout=entry.health.delay)
            if inner.closed.done():
                if opened is not None:
                    opened[0].close()
                return
        outer, payload = opened
        inner.transport.resume_reading()
        outer.join(inner, payload)

    @staticmethod
    def _log(line: str | None, failure: DialFailure | None) -> None:
        if line is None:
            return
        if failure is None:
            logger.info("%s", line)
        elif failure.permanent:
            logger.error("%s", line)
        else:
            logger.warning("%s", line)

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
            if entry.server is not None:
                entry.server.close()
        for task in list(self._tasks):
            task.cancel()
        self._listeners.clear()

    def inherited_descriptors(self) -> list[int]:
        """The listening sockets' descriptors, which a forked child must not keep open (its parent's ports)."""
        descriptors = []
        for listener in list(self._listeners.values()):
            descriptors.extend(listener.descriptors())
        return descriptors


_relay: TunnelRelay | None = None
_relay_lock = threading.Lock()


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
    """After a fork: the parent's relay has no thread here; its listening sockets are closed (the ports stay the
    parent's), and a tunnel address used here makes a relay of this process."""
    global _relay, _relay_lock
    _relay_lock = threading.Lock()
    inherited, _relay = _relay, None
    if inherited is None:
        return
    for descriptor in inherited.inherited_descriptors():
        try:
            os.close(descriptor)
        except OSError:
            pass


def _private_folder() -> str:
    """A folder only this user may open (mode 0700), for this process's private endpoints; folders of this user's
    processes that are gone are removed first."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base = runtime if runtime and os.access(runtime, os.W_OK) else tempfile.gettempdir()
    _sweep(base)
    return tempfile.mkdtemp(prefix=f"{_FOLDER_PREFIX}{os.getpid()}-", dir=base)


def _sweep(base: str) -> None:
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(_FOLDER_PREFIX):
            continue
        pid_text = name[len(_FOLDER_PREFIX) :].split("-", 1)[0]
        path = os.path.join(base, name)
        try:
            if not pid_text.isdigit() or os.stat(path).st_uid != os.getuid() or _alive(int(pid_text)):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


atexit.register(_stop_at_exit)
if hasattr(os, "register_at_fork"):  # absent where there is no fork (Windows), and so no forked child
    os.register_at_fork(after_in_child=_forget_in_child)
