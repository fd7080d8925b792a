"""What the fake cloud does to cost less CPU (rehearsal/scaler_rehearsal/fake_cloud/moto_costs.py, package_index.py),
and that it answers the same: a reset empties the cloud without rebuilding what it drops, AWS's managed policies are
there, and the package index serves a file it has fetched once from its cache folder, to any later cloud, without PyPI.

Units that boot together ask the index for the same pages at once: one request per page goes to PyPI, at most
UPSTREAM_REQUESTS at a time, on connections kept open.

Checked with the mechanisms off: with moto's own reset, the reset rebuilds every IAM backend (six here) before
dropping them; without the file cache, the second cloud's request fails once the upstream is gone (502); without
the one fetch per page, PyPI gets the page from each of the askers (5); without the bound, ten pages asked at once
are ten requests to PyPI at once; with a connection per request (urlopen's), three pages asked one after another
come on three connections.
"""

from __future__ import annotations

import http.server
import io
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from scaler_rehearsal.fake_cloud.package_index import INDEX_ROUTE, UPSTREAM_REQUESTS, PackageIndex
from tests.integration.cloud_harness import REGION
from tests.integration.conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.cloud]

WHEEL_PATH = "packages/ab/cd/0123456789/tiny-1.0-py3-none-any.whl"
WHEEL_BYTES = b"PK\x03\x04 a wheel's bytes " * 1000


class Upstream(http.server.BaseHTTPRequestHandler):
    """PyPI's file host, with one file."""

    def do_GET(self) -> None:
        if self.path != f"/{WHEEL_PATH}":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(WHEEL_BYTES)))
        self.end_headers()
        self.wfile.write(WHEEL_BYTES)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[tuple[str, http.server.ThreadingHTTPServer]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class HeldPages(http.server.BaseHTTPRequestHandler):
    """PyPI's simple API, whose answers wait until the test lets them go; it counts what it is asked, and on how
    many connections (HTTP/1.1: a client may keep one open)."""

    protocol_version = "HTTP/1.1"
    server: HeldServer

    def do_GET(self) -> None:
        with self.server.counted:
            self.server.asked.append(self.path)
            self.server.connections.add(self.client_address)
            self.server.in_flight += 1
            self.server.most_in_flight = max(self.server.most_in_flight, self.server.in_flight)
        self.server.answer.wait()
        body = f"<html>{self.path}</html>".encode()
        with self.server.counted:
            self.server.in_flight -= 1
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


class HeldServer(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), HeldPages)
        self.counted = threading.Lock()
        self.answer = threading.Event()
        self.asked: list[str] = []
        self.connections: set[tuple[str, int]] = set()
        self.in_flight = 0
        self.most_in_flight = 0


@pytest.fixture
def held_pages() -> Iterator[tuple[str, HeldServer]]:
    server = HeldServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server
    finally:
        server.answer.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def held_index(held_pages: tuple[str, HeldServer]) -> Iterator[tuple[PackageIndex, HeldServer]]:
    """An index whose upstream is `held_pages`; its connections closed at the end."""
    url, server = held_pages
    index = PackageIndex(f"{url}/simple", url)
    try:
        yield index, server
    finally:
        server.answer.set()
        index.close()


def waiting_in(thread: threading.Thread, function: str, before: str) -> bool:
    """Whether `thread` is inside `function` and has not reached `before` (what it would call next)."""
    frame = sys._current_frames().get(thread.ident or 0)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return function in names and before not in names


def ask_at_once(index: PackageIndex, pages: list[str]) -> tuple[list[threading.Thread], list[tuple[str, bytes]]]:
    answers: list[tuple[str, bytes]] = []
    threads = [threading.Thread(target=lambda page=page: answers.append(get(index, f"/simple/{page}/")))
               for page in pages]  # fmt: skip
    for thread in threads:
        thread.start()
    return threads, answers


@pytest.mark.timeout(60)
def test_askers_of_one_page_at_once_get_one_request_to_pypi(held_index: tuple[PackageIndex, HeldServer]) -> None:
    index, server = held_index
    threads, answers = ask_at_once(index, ["tiny"] * 5)

    # each asker either waits for the page another one fetches, or has asked PyPI too (the test's failure)
    def waiting() -> int:
        return sum(waiting_in(thread, "_page", before="_fetch_page") for thread in threads)

    wait_for(lambda: len(server.asked) > 1 or (len(server.asked) == 1 and waiting() == len(threads) - 1),
             "the askers waiting for the first one's page, or a second request to PyPI")  # fmt: skip
    server.answer.set()
    for thread in threads:
        thread.join(30)
    assert server.asked == ["/simple/tiny/"], "one request to PyPI for the askers of one page"
    assert answers == [("200 OK", b"<html>/simple/tiny/</html>")] * 5


@pytest.mark.timeout(60)
def test_pypi_gets_a_few_requests_at_a_time(held_index: tuple[PackageIndex, HeldServer]) -> None:
    index, server = held_index
    pages = [f"project-{number}" for number in range(10)]
    threads, answers = ask_at_once(index, pages)

    # the others wait for their turn before opening a connection, or have opened one too (the test's failure)
    def waiting() -> int:
        return sum(waiting_in(thread, "_fetch_page", before="_ask") for thread in threads)

    wait_for(lambda: server.in_flight > UPSTREAM_REQUESTS or (
        server.in_flight == UPSTREAM_REQUESTS and waiting() == len(pages) - UPSTREAM_REQUESTS
    ), f"{UPSTREAM_REQUESTS} requests to PyPI and the others waiting, or more requests")  # fmt: skip
    server.answer.set()
    for thread in threads:
        thread.join(30)
    assert server.most_in_flight == UPSTREAM_REQUESTS
    assert sorted(answers) == sorted(("200 OK", f"<html>/simple/{page}/</html>".encode()) for page in pages)


@pytest.mark.timeout(60)
def test_pages_one_after_another_come_on_one_connection(held_index: tuple[PackageIndex, HeldServer]) -> None:
    index, server = held_index
    server.answer.set()
    for number in range(3):
        assert get(index, f"/simple/project-{number}/") == (
            "200 OK",
            f"<html>/simple/project-{number}/</html>".encode(),
        )
    assert len(server.asked) == 3 and len(server.connections) == 1, server.connections


def get(index: PackageIndex, path: str) -> tuple[str, bytes]:
    """A GET of the index as the cloud's HTTP server makes it: (status, body)."""
    answered: list[str] = []
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": f"{INDEX_ROUTE}{path}", "wsgi.input": io.BytesIO()}
    body = b"".join(index(environ, lambda status, _headers: answered.append(status)))
    return answered[0], body


def test_a_file_fetched_once_is_served_to_a_later_cloud_without_pypi(
    upstream: tuple[str, http.server.ThreadingHTTPServer], tmp_path: Path
) -> None:
    url, server = upstream
    first = PackageIndex(f"{url}/simple", url, cache=tmp_path)
    assert get(first, f"/files/{WHEEL_PATH}") == ("200 OK", WHEEL_BYTES)
    server.shutdown()  # PyPI unreachable from now on
    server.server_close()
    later = PackageIndex(f"{url}/simple", url, cache=tmp_path)
    assert get(later, f"/files/{WHEEL_PATH}") == ("200 OK", WHEEL_BYTES)
    status, _body = get(later, "/files/packages/ab/cd/0123456789/other-1.0-py3-none-any.whl")
    assert status.startswith("502"), status  # what it never fetched still needs PyPI
    assert get(later, "/files/packages/../../etc/passwd")[0].startswith("404")


def test_a_reset_empties_the_cloud_without_rebuilding_what_it_drops(fake_cloud: Any) -> None:
    from moto.iam.models import IAMBackend

    s3 = boto3.client("s3", region_name=REGION)
    iam = boto3.client("iam", region_name=REGION)
    s3.create_bucket(Bucket="before-the-reset")
    s3.put_object(Bucket="before-the-reset", Key="k", Body=b"v")
    iam.create_role(RoleName="before-the-reset", AssumeRolePolicyDocument="{}")
    managed = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
    assert iam.get_policy(PolicyArn=managed)["Policy"]["PolicyName"] == "AmazonECSTaskExecutionRolePolicy"

    built: list[str] = []
    original = IAMBackend.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(str(args[0] if args else kwargs.get("region_name")))
        original(self, *args, **kwargs)

    IAMBackend.__init__ = counted  # type: ignore[method-assign]
    try:
        fake_cloud.reset()
        assert built == [], f"the reset rebuilt IAM backends it then dropped: {built}"
        assert s3.list_buckets()["Buckets"] == []
        assert iam.list_roles()["Roles"] == []
        assert iam.get_policy(PolicyArn=managed)["Policy"]["PolicyName"] == "AmazonECSTaskExecutionRolePolicy"
    finally:
        IAMBackend.__init__ = original  # type: ignore[method-assign]
