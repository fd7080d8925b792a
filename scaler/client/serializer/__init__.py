"""The public import path of the serializers (`scaler.client.serializer.Serializer`, `DefaultSerializer`);
they live in `scaler.payload.serializer`."""

from scaler.payload.serializer import DefaultSerializer, Serializer

__all__ = ["DefaultSerializer", "Serializer"]
