"""`/metrics` served by the scheduler itself (`--metrics-address HOST:PORT`), so Prometheus needs no dashboard
process. The scheduler's shell hands every message it publishes on its monitor feed to `MetricsServer.on_publish`
(the same messages a dashboard reads from the feed); a thread serves them through `scaler.monitor.metrics`. Each
scrape renders the latest state once: a scrape every 100 ms costs one render each, and at most `MAX_CONNECTIONS`
requests are served at once (more are answered 503), so a thousand scrapers cannot pile threads up in the
scheduler.
"""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from scaler.io.address import parse_http_address
from scaler.monitor.dashboard_state import DashboardState

logger = logging.getLogger(__name__)

#: requests served at once; more are refused with 503 rather than queued
MAX_CONNECTIONS = 8


def parse_host_port(address: str) -> tuple[str, int]:
    """`host:port` (or `:port`, or `tcp://host:port`) -> (host, port); ValueError naming what is wrong."""
    return parse_http_address(address, "metrics address", "127.0.0.1:8519")


class MetricsServer:
    def __init__(self, address: str) -> None:
        self.state = DashboardState()
        self.lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.server = ThreadingHTTPServer(parse_host_port(address), _handler_for(self))
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.2,), name="metrics", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}/metrics"

    def start(self) -> None:
        self._thread.start()

    def on_publish(self, message: object) -> None:
        with self.lock:
            self.state.on_message(message, time.monotonic())

    def close(self) -> None:
        if self._thread.is_alive():
            self.server.shutdown()
            self._thread.join(5)
        self.server.server_close()


def _handler_for(metrics: MetricsServer) -> type[BaseHTTPRequestHandler]:
    class MetricsRequestHandler(BaseHTTPRequestHandler):
        server_version = "scaler-scheduler-metrics"

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self._send(404, "text/plain", b"not found: the scheduler serves /metrics only\n")
                return
            if not metrics._slots.acquire(blocking=False):
                self._send(503, "text/plain", f"more than {MAX_CONNECTIONS} scrapes at once\n".encode())
                return
            try:
                from prometheus_client import CONTENT_TYPE_LATEST

                from scaler.monitor.metrics import metrics_text

                self._send(200, CONTENT_TYPE_LATEST, metrics_text(metrics.state, metrics.lock))
            finally:
                metrics._slots.release()

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s " + format, self.address_string(), *args)

    return MetricsRequestHandler
