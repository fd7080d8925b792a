"""The API server's HTTPS side: TLS with the rehearsal's certificate (HTTP/1.1, keep-alive), bearer tokens, the
REST surface of `api.py` (JSON answers; watches and followed logs streamed in chunks, one event a line), failures as
Status objects with `Content-Type: application/json`, as the real server sends them (clients parse them by that), and
the rehearsal's own fault route for tests:

    POST /rehearsal/close-watches                      every open watch ends
    POST /rehearsal/compact                            the history goes: watches resumed from before get 410 Gone
    POST /rehearsal/fail-requests?code=409&count=2     the next N API requests (of `verb`, `resource` if given) fail
    POST /rehearsal/delete-pod?namespace=NS&name=POD   a graceful deletion, as by someone else
    POST /rehearsal/evict-pod?namespace=NS&name=POD    the kubelet evicts it (phase Failed, reason Evicted)
    POST /rehearsal/oom-kill?namespace=NS&name=POD     its container is OOM-killed
    POST /rehearsal/lose-node?name=NODE                its machine is gone: containers killed, its kubelet silent
    POST /rehearsal/restore-node?name=NODE             its machine is back (its node registered again if deleted)
    POST /rehearsal/delete-node?name=NODE              lost, and its Node deleted (its pods then garbage-collected)

Only the administrator's token (the kubeconfig's) may use the fault route.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from scaler_rehearsal.fake_kubernetes import failures
from scaler_rehearsal.fake_kubernetes.access import Tokens
from scaler_rehearsal.fake_kubernetes.api import Answer, Api, LogAnswer, WatchAnswer
from scaler_rehearsal.fake_kubernetes.failures import ApiFailure
from scaler_rehearsal.fake_kubernetes.kinds import KINDS
from scaler_rehearsal.fake_kubernetes.store import Store
from scaler_rehearsal.fake_kubernetes.tables import as_table
from scaler_rehearsal.fake_kubernetes.tls import Certificates

logger = logging.getLogger(__name__)
FAULT_PREFIX = "/rehearsal/"
#: How often an idle watch looks whether it should end (server stopping, timeout) or send a bookmark.
WATCH_TICK_SECONDS = 0.5
BOOKMARK_SECONDS = 60.0


class Rehearsal(Protocol):
    """What the server needs from the rest of the rehearsal: its faults and its containers' logs."""

    def fault(self, name: str, query: dict[str, str]) -> tuple[int, str]: ...

    def take_injected_failure(self, verb: str, resource: str) -> ApiFailure | None: ...

    def log_of(self, uid: str, previous: bool) -> tuple[Path | None, bool]: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], context: ssl.SSLContext, handler: type[BaseHTTPRequestHandler]
    ) -> None:
        super().__init__(address, handler)
        self.context = context
        self.stopping = threading.Event()
        self.app: Any = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            wrapped = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as error:  # a client that does not trust the CA, or speaks plain HTTP
            logger.debug("TLS handshake with %s failed: %s", client_address, error)
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:  # the TLS socket took the connection over: the server's own close of `request` no longer closes it
            try:
                wrapped.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            wrapped.close()


class ApiServer:
    def __init__(
        self,
        api: Api,
        store: Store,
        tokens: Tokens,
        rehearsal: Rehearsal,
        certificates: Certificates,
        host: str,
        port: int,
    ) -> None:
        self.api = api
        self.store = store
        self.tokens = tokens
        self.rehearsal = rehearsal
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.set_alpn_protocols(["http/1.1"])
        cert_file, key_file = _temporary_pem(certificates.server_pem), _temporary_pem(certificates.server_key_pem)
        try:
            context.load_cert_chain(cert_file, key_file)
        finally:
            Path(cert_file).unlink(missing_ok=True)
            Path(key_file).unlink(missing_ok=True)
        self._http = _Server((host, port), context, _Handler)
        self._http.app = self
        self.port = int(self._http.server_address[1])
        self._thread = threading.Thread(target=self._http.serve_forever, name="fake-kubernetes-api", daemon=True)

    @property
    def stopping(self) -> threading.Event:
        return self._http.stopping

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._http.stopping.set()
        self.store.close_watches()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(5)


def _temporary_pem(text: str) -> str:
    import os
    import tempfile

    descriptor, path = tempfile.mkstemp(suffix=".pem")
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
    return path


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    # ------------------------------------------------------------ one request

    def _handle(self) -> None:
        app: ApiServer = self.server.app
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query, keep_blank_values=True).items()}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        user = app.tokens.user_of(self.headers.get("Authorization"))
        if user is None:
            self._send_json(401, failures.unauthorized().status())
            return
        if url.path.startswith(FAULT_PREFIX):
            self._fault(app, user.is_admin, url.path[len(FAULT_PREFIX) :], query)
            return
        try:
            injected = app.rehearsal.take_injected_failure(self.command, url.path)
            if injected is not None:
                raise injected
            outcome = app.api.handle(
                user,
                self.command,
                url.path,
                query,
                body,
                self.headers.get("Content-Type", ""),
                self.headers.get("Accept", ""),
            )
        except ApiFailure as failure:
            self._send_json(failure.code, failure.status(), failure.retry_after_seconds)
            return
        except Exception:  # a bug of the rehearsal: answered as the real server answers its own, logged
            logger.exception("fake kubernetes: %s %s", self.command, self.path)
            self._send_json(500, failures.ApiFailure(500, "InternalError", "Internal error occurred").status())
            return
        if isinstance(outcome, Answer):
            self._send_json(outcome.code, outcome.body)
        elif isinstance(outcome, WatchAnswer):
            self._stream_watch(app, outcome)
        else:
            self._send_log(app, outcome)

    def _fault(self, app: ApiServer, is_admin: bool, name: str, query: dict[str, str]) -> None:
        if not is_admin:
            code, text = 403, "the fault route takes the administrator's token (the kubeconfig's)\n"
        elif self.command != "POST":
            code, text = 405, f"{FAULT_PREFIX}{name} takes POST\n"
        else:
            code, text = app.rehearsal.fault(name, query)
        self._send(code, "text/plain", text.encode())

    # ------------------------------------------------------------ answers

    def _send(self, code: int, content_type: str, payload: bytes, retry_after: int = 0) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        if retry_after:
            self.send_header("Retry-After", str(retry_after))
        self.end_headers()
        self.wfile.write(payload)

    def _send_json(self, code: int, body: Any, retry_after: int = 0) -> None:
        self._send(code, "application/json", json.dumps(body).encode(), retry_after)

    def _start_stream(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()

    def _chunk(self, payload: bytes) -> None:
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _stream_watch(self, app: ApiServer, answer: WatchAnswer) -> None:
        watch = answer.watch
        kind = KINDS[watch.plural]
        deadline = time.monotonic() + answer.timeout_seconds
        last_bookmark = time.monotonic()
        try:
            self._start_stream("application/json")
            while not app.stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                event = watch.next(min(remaining, WATCH_TICK_SECONDS))
                if event is None:
                    if answer.bookmarks and time.monotonic() - last_bookmark >= BOOKMARK_SECONDS:
                        last_bookmark = time.monotonic()
                        self._bookmark(app, watch, kind.kind, kind.api_version)
                    continue
                event_type, obj = event
                if event_type == "CLOSED":
                    break
                if answer.table and event_type in ("ADDED", "MODIFIED", "DELETED"):
                    obj = as_table(kind, obj, app.store.now())
                self._chunk(json.dumps({"type": event_type, "object": obj}).encode() + b"\n")
            self._chunk(b"")
        except (OSError, ssl.SSLError):  # the client went away
            self.close_connection = True
        finally:
            app.store.stop_watch(watch)

    def _bookmark(self, app: ApiServer, watch: Any, kind: str, api_version: str) -> None:
        with app.store.lock:  # every event up to this revision was queued already: the queue is empty now
            revision = str(app.store.revision)
        self._chunk(
            json.dumps(
                {
                    "type": "BOOKMARK",
                    "object": {"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": revision}},
                }
            ).encode()
            + b"\n"
        )

    def _send_log(self, app: ApiServer, answer: LogAnswer) -> None:
        path, running = app.rehearsal.log_of(answer.uid, answer.previous)
        if path is None:
            pod = app.store.find("pods", answer.namespace, answer.name) or {}
            container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", "")
            state = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0].get("state", {})
            reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
            message = (
                f'previous terminated container "{container}" in pod "{answer.name}" not found'
                if answer.previous
                else f'container "{container}" in pod "{answer.name}" is waiting to start: {reason}'
            )
            self._send_json(400, failures.bad_request(message).status())
            return
        text = path.read_bytes()
        if answer.tail_lines is not None:
            lines = text.splitlines(keepends=True)
            text = b"".join(lines[-answer.tail_lines :]) if answer.tail_lines else b""
        if not answer.follow or not running:
            self._send(200, "text/plain", text)
            return
        self._follow(app, path, text, answer.uid, lambda: app.rehearsal.log_of(answer.uid, False)[1])

    def _follow(self, app: ApiServer, path: Path, first: bytes, uid: str, running: Callable[[], bool]) -> None:
        try:
            self._start_stream("text/plain")
            if first:
                self._chunk(first)
            with open(path, "rb") as log:
                log.seek(0, 2)
                while not app.stopping.is_set():
                    data = log.read(65536)
                    if data:
                        self._chunk(data)
                    elif not running():
                        break
                    else:
                        time.sleep(0.2)
            self._chunk(b"")
        except (OSError, ssl.SSLError):
            self.close_connection = True
