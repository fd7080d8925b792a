"""The package index as the fake cloud's units reach it: a read-through mirror of PyPI's simple API on the fake
cloud's own port (what a VPC's way out to the internet stands for; isolated units reach nothing else outside).

    GET {AWS_ENDPOINT_URL}/scaler-fake-cloud/pypi/simple/<project>/   PyPI's page (HTML or JSON, as asked), its file
                                                                     links made relative to the mirror
    GET {AWS_ENDPOINT_URL}/scaler-fake-cloud/pypi/files/<path>        the file, from PyPI's file host

Project pages are kept for ten minutes and served with that max-age, PyPI's own (a proxy in front of PyPI may strip
the header, which would make every install ask PyPI again). Files never change: the first request of one downloads
it into the cache folder (`index-files/`, shared by clouds and kept between runs), and every request is served from
there. The installers cache files too, but by URL, and a cloud's URL has its port: each new cloud had every file
fetched from PyPI again (TLS downloads in the cloud's process, a tenth of its CPU in the test suite).

Units booting together ask for the same pages at once (the four ECS tasks of a burst, each uv resolving dozens of
requirements in parallel): one request per page goes to PyPI, the others wait for its answer, and at most
UPSTREAM_REQUESTS go at a time, on connections kept open (`KeptConnections`: no name lookup, TCP or TLS handshake
per page). Otherwise each page is fetched once per unit, all at once, each request resolving PyPI's name and making
a TLS connection: a resolver that drops some of many lookups made together (glibc asks again after 5 s) then holds a
burst's installs for 5 or 10 s.
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

INDEX_ROUTE = "/scaler-fake-cloud/pypi"
UPSTREAM_INDEX = "https://pypi.org/simple"
UPSTREAM_FILES = "https://files.pythonhosted.org"
PAGE_SECONDS = 600.0
_PROJECT = re.compile(r"^[A-Za-z0-9._-]+$")
#: A file's path on PyPI's file host (`packages/ab/cd/<hash>/name-1.0-py3-none-any.whl`).
_FILE = re.compile(r"^[A-Za-z0-9._/+-]+$")
#: At most this many requests to PyPI at a time, from all the units of a cloud.
UPSTREAM_REQUESTS = 4
_TIMEOUT_SECONDS = 60.0
_CHUNK = 1 << 16
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class PackageIndex:
    """The mirror's WSGI part: `handles(path)` says whether a request is its own."""

    def __init__(
        self, upstream_index: str = UPSTREAM_INDEX, upstream_files: str = UPSTREAM_FILES, cache: Path | None = None
    ) -> None:
        self._index = upstream_index.rstrip("/")
        self._files = upstream_files.rstrip("/")
        self._pages: dict[tuple[str, str], tuple[float, str, bytes]] = {}  #: (project, accept) -> (at, type, body)
        #: (project, accept) -> held while that page is fetched: whoever asks for it meanwhile waits for its answer
        self._fetching: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()
        self._upstream = threading.BoundedSemaphore(UPSTREAM_REQUESTS)
        #: a folder made here (no cache given) is this index's own: removed on close
        self._own_folder = None if cache else Path(tempfile.mkdtemp(prefix="scaler-fake-cloud-index-"))
        self._cache = Path(cache or self._own_folder or "") / "index-files"
        self._tls = ssl.create_default_context()  #: one for every request (loading the CA store is costly)
        self._index_connections = KeptConnections(self._index, self._tls)

    def close(self) -> None:
        """Close the connections kept open to PyPI, and remove the files' folder if this index made it."""
        self._index_connections.close()
        if self._own_folder is not None:
            shutil.rmtree(self._own_folder, ignore_errors=True)

    @staticmethod
    def handles(path: str) -> bool:
        return path.startswith(INDEX_ROUTE + "/")

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")[len(INDEX_ROUTE) :]
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", "the package index is read-only\n")
        if path.startswith("/simple/"):
            return self._page(path[len("/simple/") :].strip("/"), environ, start_response)
        if path.startswith("/files/") and ".." not in path and _FILE.match(path[len("/files/") :]):
            return self._file(path[len("/files/") :], start_response)
        return _answer(start_response, "404 Not Found", f"{INDEX_ROUTE}: no such page\n")

    def _page(self, project: str, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not _PROJECT.match(project):
            return _answer(start_response, "404 Not Found", f"no project {project!r}\n")
        accept = environ.get("HTTP_ACCEPT", "text/html")
        key = (project.lower(), accept)
        with self._lock:
            fetching = self._fetching.setdefault(key, threading.Lock())
        with fetching:
            with self._lock:
                cached = self._pages.get(key)
            if cached is None or time.monotonic() - cached[0] > PAGE_SECONDS:
                try:
                    content_type, body = self._fetch_page(project, accept)
                except urllib.error.HTTPError as error:
                    return _answer(start_response, f"{error.code} {error.reason}", f"the package index: {error}\n")
                except OSError as error:
                    return _answer(start_response, "502 Bad Gateway",
                                   f"the package index cannot be reached: {error}\n")  # fmt: skip
                cached = (time.monotonic(), content_type, body)
                with self._lock:
                    self._pages[key] = cached
        _at, content_type, body = cached
        start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body))),
                                  ("Cache-Control", f"max-age={int(PAGE_SECONDS)}, public")])  # fmt: skip
        return [body]

    def _fetch_page(self, project: str, accept: str) -> tuple[str, bytes]:
        url = f"{self._index}/{project}/"
        with self._upstream:
            response = self._index_connections.get(url, {"Accept": accept})
            if response.status in _REDIRECTS:  # a name PyPI spells otherwise: followed as urllib follows it
                request = urllib.request.Request(url, headers={"Accept": accept})
                with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS, context=self._tls) as redirected:
                    response = Answer(redirected.status, redirected.reason, redirected.headers, redirected.read())
        if response.status >= 400:
            raise urllib.error.HTTPError(url, response.status, response.reason, response.headers, None)
        content_type = response.headers.get("Content-Type", "text/html")
        body = response.body
        # from /scaler-fake-cloud/pypi/simple/<project>/, ../../files/ is /scaler-fake-cloud/pypi/files/
        return content_type, body.replace(f"{self._files}/".encode(), b"../../files/")

    def _file(self, path: str, start_response: Callable[..., Any]) -> Iterable[bytes]:
        cached = self._cache / path
        if not cached.is_file():
            try:
                self._download(path, cached)
            except urllib.error.HTTPError as error:
                return _answer(start_response, f"{error.code} {error.reason}", f"the package index: {error}\n")
            except OSError as error:
                return _answer(start_response, "502 Bad Gateway", f"the package index cannot be reached: {error}\n")
        headers = [("Content-Type", "application/octet-stream"), ("Content-Length", str(cached.stat().st_size)),
                   ("Cache-Control", "max-age=31536000, immutable")]  # fmt: skip
        start_response("200 OK", headers)
        return _streamed(open(cached, "rb"))

    def _download(self, path: str, cached: Path) -> None:
        """The file from PyPI into the cache (under a name of its own until it is whole: clouds share the cache)."""
        cached.parent.mkdir(parents=True, exist_ok=True)
        with self._upstream, urllib.request.urlopen(f"{self._files}/{path}", timeout=_TIMEOUT_SECONDS,
                                                    context=self._tls) as response:  # fmt: skip
            handle, partial = tempfile.mkstemp(dir=cached.parent, prefix=".partial-")
            try:
                with os.fdopen(handle, "wb") as file:
                    shutil.copyfileobj(response, file, _CHUNK)
                os.replace(partial, cached)
            except BaseException:
                Path(partial).unlink(missing_ok=True)
                raise


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    headers: Message
    body: bytes


class KeptConnections:
    """HTTP/1.1 connections to one upstream host, kept open between requests: as many as requests were made at once
    (the index's callers hold UPSTREAM_REQUESTS), each carrying one request at a time."""

    def __init__(self, base_url: str, tls: ssl.SSLContext) -> None:
        parts = urllib.parse.urlsplit(base_url)
        self._is_https = parts.scheme == "https"
        self._host = parts.netloc
        self._tls = tls
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def get(self, url: str, headers: dict[str, str]) -> Answer:
        """GET `url` (on this host): on a kept connection, once more on a new one when the kept one was closed by
        the server meanwhile. OSError when the host cannot be reached."""
        with self._lock:
            connection = self._idle.pop() if self._idle else None
        path = urllib.parse.urlsplit(url).path
        if connection is not None:
            try:
                return self._ask(connection, path, headers)
            except (http.client.HTTPException, OSError):
                connection.close()
        return self._ask(self._new(), path, headers)

    def _ask(self, connection: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> Answer:
        try:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            answer = Answer(response.status, response.reason, response.headers, response.read())
        except http.client.HTTPException as error:
            connection.close()
            raise OSError(f"{self._host}: {error!r}") from error
        except OSError:
            connection.close()
            raise
        if response.will_close:
            connection.close()
        else:
            with self._lock:
                self._idle.append(connection)
        return answer

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _new(self) -> http.client.HTTPConnection:
        if self._is_https:
            return http.client.HTTPSConnection(self._host, timeout=_TIMEOUT_SECONDS, context=self._tls)
        return http.client.HTTPConnection(self._host, timeout=_TIMEOUT_SECONDS)


def _streamed(response: Any) -> Iterator[bytes]:
    try:
        while chunk := response.read(_CHUNK):
            yield chunk
    finally:
        response.close()


def _answer(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
    body = text.encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
