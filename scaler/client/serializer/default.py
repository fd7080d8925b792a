"""The reference's import path of the default serializer (cloudpickle, highest protocol)."""

from scaler.client.serializer import DefaultSerializer

__all__ = ["DefaultSerializer"]
