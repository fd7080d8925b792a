"""The reference's import path of the default serializer (cloudpickle, highest protocol)."""

from scaler.payload.serializer import DefaultSerializer

__all__ = ["DefaultSerializer"]
