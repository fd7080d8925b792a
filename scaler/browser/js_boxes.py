"""CURVE's boxes from the page's tweetnacl (the npm package `tweetnacl`, which the try page loads before Python), where
there is one: NaCl's box in JavaScript, audited, and far faster than the pure Python of `protocol/curve_box.py` in
Pyodide (the same boxes byte for byte: both are NaCl's). Without it (or outside a browser), the pure boxes are used."""

from __future__ import annotations

from typing import Any

from scaler.browser.links_base import is_browser
from scaler.protocol import curve_box
from scaler.protocol.zmtp_curve import PURE_BOXES, Boxes


class TweetNaclBoxes:
    """`zmtp_curve.Boxes` over `window.nacl`."""

    def __init__(self, nacl: Any) -> None:
        from pyodide.ffi import to_js  # type: ignore[import-not-found]

        self._nacl = nacl
        self._to_js = to_js

    def public_key(self, secret: bytes) -> bytes:
        return bytes(self._nacl.scalarMult.base(self._to_js(secret)).to_bytes())

    def shared_key(self, their_public: bytes, our_secret: bytes) -> bytes:
        return bytes(self._nacl.box.before(self._to_js(their_public), self._to_js(our_secret)).to_bytes())

    def secretbox(self, message: bytes, nonce: bytes, key: bytes) -> bytes:
        return bytes(self._nacl.secretbox(self._to_js(message), self._to_js(nonce), self._to_js(key)).to_bytes())

    def secretbox_open(self, box: bytes, nonce: bytes, key: bytes) -> bytes:
        opened = self._nacl.secretbox.open(self._to_js(box), self._to_js(nonce), self._to_js(key))
        if opened is None:
            raise curve_box.BoxError("a box that does not open with these keys")
        return bytes(opened.to_bytes())


def page_boxes() -> Boxes:
    """The page's tweetnacl when it has one, else the pure boxes."""
    if not is_browser():
        return PURE_BOXES
    import js  # type: ignore[import-not-found]

    nacl = getattr(js, "nacl", None)
    return PURE_BOXES if nacl is None else TweetNaclBoxes(nacl)
