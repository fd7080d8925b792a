"""What the fake cloud does to cost less CPU (rehearsal/scaler_rehearsal/fake_cloud/moto_costs.py, package_index.py),
and that it answers the same: a reset empties the cloud without rebuilding what it drops, AWS's managed policies are
there, and the package index serves a file it has fetched once from its cache folder, to any later cloud, without PyPI.

Checked with the mechanisms off: with moto's own reset, the reset rebuilds every IAM backend (six here) before
dropping them; without the file cache, the second cloud's request fails once the upstream is gone (502).
"""

from __future__ import annotations

import http.server
import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from scaler_rehearsal.fake_cloud.package_index import INDEX_ROUTE, PackageIndex
from tests.integration.cloud_harness import REGION

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
