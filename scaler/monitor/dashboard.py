"""`scaler_gui` / `scaler_ui`: the web dashboard. A thread reads the monitor feed into a DashboardState; a small
HTTP server (standard library, one thread per request) serves the page, its live updates and the metrics:

- `/`: the page (`static/dashboard.html`, no external script or font);
- `/events`: server-sent events, the state as JSON every `broadcast_interval_seconds`;
- `/state`: the same JSON once;
- `/api/tasks?offset=&limit=&sort=&order=&q=&state=&client=&worker=&function=`: one page of the task log
  (`scaler.monitor.task_log`) as JSON; a bad parameter gets 400 naming it;
- `/api/jobs`: the named jobs the scheduler keeps (name, state, tasks total/done/failed, submitter, owning key,
  age), as of the latest status;
- `/api/actors`: the live actors (class, name, client, worker, state, restarts, calls waiting and done, age), as of
  the latest status;
- `/api/story?task=<hex>`: a task's story, asked of the scheduler (`scaler.monitor.story_asker`; the same records
  `future.story()` returns); a task the scheduler forgot is answered `forgotten` with the scheduler's note, a bad
  task id 400, a scheduler that cannot be asked 503, each naming why;
- `/metrics`: Prometheus text format (`scaler.monitor.metrics`);
- `/static/uplot.min.js`, `/static/uplot.min.css`: the vendored chart library (static/uPlot.LICENSE).

At most `MAX_EVENT_STREAMS` pages are kept live at once (each holds a thread): a page past that gets 503 on
`/events` and says so, rather than a thousand open tabs holding a thousand threads. Task log pages are answered
from a small cache until the log changes, so a thousand tabs asking for the same page cost one query per change.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from scaler.config.sections import GUIConfig
from scaler.io.address import AddressError, is_socket_file, monitor_address_to_read, parse_address, parse_http_address
from scaler.io.tunnel.tls import TlsFileError
from scaler.monitor.dashboard_state import DashboardState
from scaler.monitor.feed import FeedConnectionError, FeedError, FeedReader
from scaler.monitor.story_asker import (
    StoryAsker,
    StoryQueryError,
    StoryUnavailable,
    parse_task,
    scheduler_address_for,
    story_json,
)
from scaler.monitor.task_log import QueryError, TaskQuery, TaskTransitionLog, parse_query
from scaler.protocol.messages import TaskTransitions
from scaler.security.find import find_keys
from scaler.security.key_files import KeyFileError
from scaler.security.tls_settings import trust_settings

logger = logging.getLogger(__name__)

FEED_POLL_SECONDS = 0.2
#: live pages (server-sent event streams) served at once
MAX_EVENT_STREAMS = 32
#: finished tasks drawn on the timeline (the task log holds many more: `--task-log-max-size`)
TIMELINE_SPANS = 500
#: task log answers kept for their query until the log changes
PAGES_CACHED = 64
STATIC_FILES = {"uplot.min.js": "text/javascript; charset=utf-8", "uplot.min.css": "text/css; charset=utf-8"}


def gui_host_port(gui_address: str) -> tuple[str, int]:
    """The dashboard's (host, port); AddressError naming the setting when it is not HOST:PORT with a port up to
    65535 (`127.0.0.1:99999` was an OverflowError traceback, once the rest of a stack had started)."""
    return parse_http_address(gui_address, "gui_address", "127.0.0.1:50001")


class Dashboard:
    def __init__(self, config: GUIConfig) -> None:
        self.config = config
        # KeyFileError at start, naming the file; no key setting: those of a local scheduler's connection file
        self.keys = find_keys("client", config.monitor_address, config)
        self.security = self.keys.security
        self.state = DashboardState(spans_kept=TIMELINE_SPANS)
        self.task_log = TaskTransitionLog(config.task_log_max_size)
        self.stories = StoryAsker(
            scheduler_address_for(config.monitor_address, config.scheduler_address), security=self.security
        )
        self._pages: collections.OrderedDict[TaskQuery, tuple[int, bytes]] = collections.OrderedDict()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.streams = threading.BoundedSemaphore(MAX_EVENT_STREAMS)
        self.server = ThreadingHTTPServer(gui_host_port(config.gui_address), _handler_for(self))
        self.server.daemon_threads = True
        self._feed_thread = threading.Thread(target=self._read_feed, name="dashboard-feed", daemon=True)

    @property
    def url(self) -> str:
        return self.urls[0]

    @property
    def urls(self) -> list[str]:
        """Where the page is reached: its address; for a bind on every interface, this machine's loopback first,
        then its name and its other addresses (what another machine types)."""
        host, port = self.server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        return page_urls(host, int(port))

    def serve(self) -> None:
        self._feed_thread.start()
        try:
            self.server.serve_forever(poll_interval=0.2)
        finally:
            self.stopping.set()
            self.server.server_close()
            self._feed_thread.join(5)

    def stop(self) -> None:
        self.stopping.set()
        threading.Thread(target=self.server.shutdown, daemon=True).start()

    def state_json(self) -> bytes:
        with self.lock:
            view = self.state.view(time.monotonic())
            view["task_log"] = self.task_log.summary()
        view["monitor_address"] = self.config.monitor_address
        view["stale_after_seconds"] = 5 * self.config.status_report_interval_seconds
        return json.dumps(view).encode()

    def tasks_json(self, query_string: str) -> tuple[int, str, bytes]:
        try:
            query = parse_query(parse_qs(query_string, keep_blank_values=True))
        except QueryError as error:
            refusal = {"error": str(error), "parameter": error.parameter}
            return 400, "application/json", json.dumps(refusal).encode()
        with self.lock:
            cached = self._pages.get(query)
            if cached is not None and cached[0] == self.task_log.version:
                return 200, "application/json", cached[1]
            body = json.dumps(self.task_log.query(query)).encode()
            self._pages[query] = (self.task_log.version, body)
            self._pages.move_to_end(query)
            if len(self._pages) > PAGES_CACHED:
                self._pages.popitem(last=False)
        return 200, "application/json", body

    def story_answer(self, query_string: str) -> tuple[int, str, bytes]:
        """`/api/story?task=<hex>`: the scheduler's story of a task (no lock: it waits on the scheduler)."""
        try:
            body: dict[str, object] = story_json(self.stories.ask(parse_task(parse_qs(query_string))))
            code = 200
        except StoryQueryError as error:
            code, body = 400, {"error": str(error), "parameter": "task"}
        except StoryUnavailable as error:
            code, body = 503, {"error": str(error)}
        return code, "application/json", json.dumps(body).encode()

    def answer(self, path: str, query_string: str = "") -> tuple[int, str, bytes]:
        """(status, content type, body) of every path but the event stream."""
        if path == "/api/tasks":
            return self.tasks_json(query_string)
        if path == "/api/jobs":
            with self.lock:
                jobs = self.state.jobs()
            return 200, "application/json", json.dumps({"jobs": jobs}).encode()
        if path == "/api/actors":
            with self.lock:
                actors = self.state.actors()
            return 200, "application/json", json.dumps({"actors": actors}).encode()
        if path == "/api/story":
            return self.story_answer(query_string)
        if path in ("/", "/index.html"):
            return 200, "text/html; charset=utf-8", _page()
        if path == "/state":
            return 200, "application/json", self.state_json()
        if path == "/metrics":
            from prometheus_client import CONTENT_TYPE_LATEST

            from scaler.monitor.metrics import metrics_text

            return 200, CONTENT_TYPE_LATEST, metrics_text(self.state, self.lock)
        return _static(path)

    def _read_feed(self) -> None:
        reader = FeedReader(self.config.monitor_address, security=self.keys)
        try:
            while not self.stopping.is_set():
                try:
                    message = reader.receive(FEED_POLL_SECONDS)
                except FeedError as error:
                    logger.error("%s", error)
                    self.stop()
                    return
                if message is not None:
                    with self.lock:
                        self.state.on_message(message, time.monotonic())
                        if isinstance(message, TaskTransitions):
                            self.task_log.on_transitions(message)
        finally:
            reader.close()


def _handler_for(dashboard: Dashboard) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "scaler-dashboard"

        def do_GET(self) -> None:
            path, _, query_string = self.path.partition("?")
            if path == "/events":
                self._stream_bounded()
            else:
                self._send(*dashboard.answer(path, query_string))

        def _send(self, code: int, kind: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _stream_bounded(self) -> None:
            if not dashboard.streams.acquire(blocking=False):
                self._send(503, "text/plain", f"more than {MAX_EVENT_STREAMS} live pages at once\n".encode())
                return
            try:
                self._stream()
            finally:
                dashboard.streams.release()

        def _stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            try:
                while not dashboard.stopping.is_set():
                    self.wfile.write(b"data: " + dashboard.state_json() + b"\n\n")
                    self.wfile.flush()
                    dashboard.stopping.wait(dashboard.config.broadcast_interval_seconds)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s " + format, self.address_string(), *args)

    return Handler


#: Hosts that mean "every interface" in a bind address.
WILDCARD_HOSTS = ("0.0.0.0", "", "*", "::")


def page_urls(host: str, port: int) -> list[str]:
    """The URLs of a page served at host:port: that host's; for a wildcard, 127.0.0.1, then this machine's name
    and its non-loopback IPv4 addresses."""
    if host not in WILDCARD_HOSTS:
        return [f"http://{host}:{port}/"]
    import socket

    import psutil

    names = [socket.gethostname()]
    try:
        for addresses in psutil.net_if_addrs().values():
            names += [a.address for a in addresses if a.family == socket.AF_INET and not a.address.startswith("127.")]
    except (OSError, RuntimeError):  # no interface list here: the name only
        pass
    return [f"http://{name}:{port}/" for name in dict.fromkeys(["127.0.0.1", *names]) if name]


def _static(path: str) -> tuple[int, str, bytes]:
    """(status, content type, body) of a vendored static file, or a 404."""
    name = path.removeprefix("/static/")
    if not path.startswith("/static/") or name not in STATIC_FILES:
        return 404, "text/plain", b"not found\n"
    return 200, STATIC_FILES[name], resources.files("scaler.monitor").joinpath(f"static/{name}").read_bytes()


def _page() -> bytes:
    return resources.files("scaler.monitor").joinpath("static/dashboard.html").read_bytes()


def run_dashboard(config: GUIConfig) -> int:
    try:
        monitor, why = monitor_address_to_read(config.monitor_address, is_socket_file)
        if why:
            logger.warning("%s", why)
            config = dataclasses.replace(config, monitor_address=monitor)
        parse_address(monitor)  # a malformed one is refused here, naming the accepted forms
        trust_settings(config)
        dashboard = Dashboard(config)
    except (KeyFileError, AddressError, TlsFileError, FeedConnectionError) as error:
        logger.error("%s", error)
        return 2
    except OSError as error:
        from scaler.io.port_owner import port_owner

        port = int(config.gui_address.rpartition(":")[2])
        logger.error("cannot serve the dashboard on %s: %s%s", config.gui_address, error.strerror, port_owner(port))
        return 2
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: dashboard.stop())
    others = dashboard.urls[1:]
    logger.info(
        "dashboard at %s of %s (metrics at %smetrics)%s", dashboard.url, config.monitor_address, dashboard.url,
        f"; from other machines: {', '.join(others)}" if others else "",
    )  # fmt: skip
    dashboard.serve()
    return 0


def main() -> None:
    """`python -m scaler.monitor.dashboard '<GUIConfig as JSON>'`: how `scaler FILE` starts the dashboard."""
    import sys

    from scaler.config.logging_setup import setup_logging
    from scaler.config.sections import section_from_json

    config = section_from_json(GUIConfig, sys.argv[1])
    setup_logging(config, "dashboard")
    sys.exit(run_dashboard(config))


if __name__ == "__main__":
    main()
