"""The pure NaCl box (scaler/protocol/curve_box.py) on known answers: RFC 7748's X25519 vector, Z85's own example,
public keys as libzmq derives them, boxes that open only with the right keys and unchanged. Interoperation with
libzmq's CURVE: tests/integration/test_zmtp_peers.py."""

from __future__ import annotations

import os

import pytest
import zmq

from scaler.protocol import curve_box


def test_x25519_of_rfc_7748() -> None:
    scalar = bytes.fromhex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4")
    point = bytes.fromhex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c")
    expected = "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"
    assert curve_box.x25519(scalar, point).hex() == expected


def test_z85_of_its_specification_and_keys_as_libzmq_derives_them() -> None:
    assert curve_box.z85_decode("HelloWorld") == bytes.fromhex("864fd26fb559f75b")
    public, secret = zmq.curve_keypair()
    assert curve_box.public_key(curve_box.z85_decode(secret.decode())) == curve_box.z85_decode(public.decode())
    with pytest.raises(ValueError, match="multiple of 5"):
        curve_box.z85_decode("abcd")


def test_a_box_opens_with_the_pairs_keys_only_and_unchanged() -> None:
    ours, theirs = os.urandom(32), os.urandom(32)
    nonce, message = os.urandom(24), os.urandom(1000)
    sealed = curve_box.box(message, nonce, curve_box.public_key(theirs), ours)
    assert len(sealed) == len(message) + curve_box.MAC_BYTES
    assert curve_box.box_open(sealed, nonce, curve_box.public_key(ours), theirs) == message
    changed = bytes([sealed[0] ^ 1]) + sealed[1:]
    for box, key in ((changed, theirs), (sealed, os.urandom(32))):
        with pytest.raises(curve_box.BoxError):
            curve_box.box_open(box, nonce, curve_box.public_key(ours), key)
