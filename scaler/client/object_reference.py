"""The public import path of `ObjectReference` (`scaler.client.object_reference.ObjectReference`); it lives in
`scaler.payload.references`. `_rebuild` stays importable here so that a reference pickled by an earlier version
(which named this module) still loads."""

from scaler.payload.references import ObjectReference
from scaler.payload.references import _rebuild as _rebuild

__all__ = ["ObjectReference"]
