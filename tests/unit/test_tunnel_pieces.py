"""The pure pieces of the tunnels (scaler.io.tunnel): the address grammar of tls://, ws:// and wss://, which proxy
the environment names for an address (no_proxy's forms), the CONNECT exchange, and what a WebSocket port answers
(an upgrade, a plain GET, a path it does not serve), with a whole upgrade and messages both ways in memory."""

from __future__ import annotations

import pytest

from scaler.io.address import AddressError, parse_address
from scaler.io.tunnel import proxy as proxies
from scaler.io.tunnel import websocket
from scaler.io.tunnel.front import storage_for


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("tls://hub.example.com:8516", "tls://hub.example.com:8516"),
        ("ws://127.0.0.1:8516", "ws://127.0.0.1:8516/"),
        ("wss://hub.example.com", "wss://hub.example.com:443/"),
        ("ws://hub.example.com/storage", "ws://hub.example.com:80/storage"),
        ("wss://[::1]/", "wss://[::1]:443/"),
    ],
)
def test_tunnel_addresses_parse_with_their_default_ports_and_paths(text: str, normal: str) -> None:
    assert str(parse_address(text)) == normal


def test_a_derived_address_keeps_the_scheme_and_path_and_a_wildcard_becomes_loopback() -> None:
    bound = parse_address("wss://0.0.0.0:8516/x")
    assert str(bound.with_port_offset(2)) == "wss://0.0.0.0:8518/x"
    assert str(bound.connectable()) == "wss://127.0.0.1:8516/x"
    assert bound.is_tunnel and bound.uses_tls and bound.is_websocket


@pytest.mark.parametrize("text", ["tls://hub.example.com", "wss://:443", "ws://host:0/", "tls://host:http"])
def test_malformed_tunnel_addresses_are_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(AddressError, match="malformed address"):
        parse_address(text)


@pytest.mark.parametrize(
    ("no_proxy", "host", "bypassed"),
    [
        ("", "hub.example.com", False),
        ("*", "hub.example.com", True),
        ("example.com", "hub.example.com", True),
        (".example.com", "hub.example.com", True),
        ("ample.com", "hub.example.com", False),
        ("10.0.0.0/8", "10.1.2.3", True),
        ("10.0.0.0/8", "11.1.2.3", False),
        ("hub.example.com:443", "hub.example.com", True),
        ("hub.example.com:8443", "hub.example.com", False),
        ("localhost, 127.0.0.1", "127.0.0.1", True),
    ],
)
def test_no_proxy_names_hosts_domains_networks_and_ports(no_proxy: str, host: str, bypassed: bool) -> None:
    environment = {"https_proxy": "http://proxy.corp:3128", "no_proxy": no_proxy}
    assert (proxies.proxy_for("wss", host, 443, environment) is None) is bypassed


def test_wss_and_tls_use_the_https_proxy_and_ws_the_http_one() -> None:
    environment = {"HTTPS_PROXY": "http://user:secret@proxy.corp:3128", "HTTP_PROXY": "proxy.corp:8080"}
    https = proxies.proxy_for("wss", "hub", 443, environment)
    assert https is not None and (https.host, https.port, https.variable) == ("proxy.corp", 3128, "HTTPS_PROXY")
    assert https.url == "http://proxy.corp:3128" and https.authorization == "Basic dXNlcjpzZWNyZXQ="
    assert proxies.proxy_for("tls", "hub", 8516, environment) == https
    plain = proxies.proxy_for("ws", "hub", 80, environment)
    assert plain is not None and plain.port == 8080
    assert proxies.proxy_for("ws", "hub", 80, {**environment, "REQUEST_METHOD": "GET"}) is None  # CGI: not HTTP_PROXY


def test_an_https_proxy_url_is_refused_in_one_line() -> None:
    with pytest.raises(proxies.ProxySettingError, match="https_proxy='https://proxy:3128': only an http:// proxy"):
        proxies.proxy_for("wss", "hub", 443, {"https_proxy": "https://proxy:3128"})


def test_the_connect_exchange() -> None:
    proxy = proxies.parse_proxy("https_proxy", "http://proxy.corp:3128")
    assert proxies.connect_request("hub", 443, proxy) == b"CONNECT hub:443 HTTP/1.1\r\nHost: hub:443\r\n\r\n"
    assert proxies.parse_connect_reply(b"HTTP/1.1 200 Connection established\r\n\r\n").is_tunnel
    forbidden = proxies.parse_connect_reply(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
    assert not forbidden.is_tunnel and forbidden.is_permanent_refusal
    assert not proxies.parse_connect_reply(b"HTTP/1.0 503 Service Unavailable\r\n\r\n").is_permanent_refusal
    text = proxies.refusal_text(proxy, "hub", 443, forbidden)
    said = "the proxy http://proxy.corp:3128 (https_proxy) refused to CONNECT to hub:443: 403 Forbidden"
    assert text.startswith(said)
    with pytest.raises(ValueError, match="not an HTTP reply"):
        proxies.parse_connect_reply(b"SSH-2.0-OpenSSH\r\n\r\n")


def test_an_upgrade_then_messages_both_ways_carry_the_bytes_and_a_close_ends_it() -> None:
    client, request = websocket.upgrade_request("hub", 443, "/storage")
    answer = websocket.answer_request(request, ["/", "/storage"], "a scaler test")
    assert isinstance(answer, websocket.Upgrade) and answer.path == "/storage"
    client_side, early = websocket.accept_upgrade(client, answer.reply + answer.framing.wrap(b"\xffgreeting"), "hub")
    assert early == b"\xffgreeting"  # bytes sent with the 101 reach ZeroMQ too
    payload, reply = answer.framing.unwrap(client_side.wrap(b"one") + client_side.wrap(b"two"))
    assert (payload, reply) == (b"onetwo", b"")
    goodbye = client_side.close()
    payload, reply = answer.framing.unwrap(goodbye)
    assert payload == b"" and answer.framing.closed and reply  # the close is answered
    assert answer.framing.wrap(b"late") == b""  # nothing is sent once closed


def test_a_plain_get_a_path_not_served_and_no_subprotocol_are_answered_and_closed() -> None:
    page = websocket.answer_request(b"GET / HTTP/1.1\r\nHost: hub\r\n\r\n", ["/"], "a scaler scheduler")
    assert isinstance(page, websocket.PlainReply) and page.reply.startswith(b"HTTP/1.1 200 OK")
    assert b"a scaler scheduler" in page.reply and websocket.SUBPROTOCOL.encode() in page.reply
    missing = websocket.answer_request(b"GET /x HTTP/1.1\r\nHost: hub\r\n\r\n", ["/", "/storage"], "scaler")
    assert isinstance(missing, websocket.PlainReply) and missing.reply.startswith(b"HTTP/1.1 404")
    assert b"this port serves /, /storage" in missing.reply
    _, request = websocket.upgrade_request("hub", 443, "/")
    bare = request.replace(b"Sec-WebSocket-Protocol: zmtp.scaler\r\n", b"")
    refused = websocket.answer_request(bare, ["/"], "scaler")
    assert isinstance(refused, websocket.PlainReply) and refused.reply.startswith(b"HTTP/1.1 400")
    with pytest.raises(websocket.UpgradeRefused, match="refused the WebSocket upgrade with 400"):
        client, _ = websocket.upgrade_request("hub", 443, "/")
        websocket.accept_upgrade(client, refused.reply, "wss://hub:443/")


@pytest.mark.parametrize(
    ("front", "reached", "storage"),
    [
        ("wss://0.0.0.0:443", "wss://hub.example.com/", "wss://hub.example.com:443/storage"),
        (
            "wss://0.0.0.0:8443/scaler/",
            "wss://proxy.example.com:443/scaler/",
            "wss://proxy.example.com:443/scaler/storage",
        ),
        ("ws://0.0.0.0:8080", "wss://hub.example.com/", "wss://hub.example.com:443/storage"),
        ("tls://0.0.0.0:8516", "tls://hub.example.com:9516", "tls://hub.example.com:9517"),
        ("wss://0.0.0.0:443", "tcp://10.0.0.1:8516", "tcp://10.0.0.1:8517"),
        ("tls://0.0.0.0:8516", "wss://hub.example.com/", "tcp://10.0.0.1:8517"),
        ("", "wss://hub.example.com/", "tcp://10.0.0.1:8517"),
    ],
)
def test_a_peer_that_came_through_the_front_reaches_the_storage_through_it(
    front: str, reached: str, storage: str
) -> None:
    assert storage_for("tcp://10.0.0.1:8517", front, reached) == storage
