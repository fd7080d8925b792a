"""The reference's import path of the serializer interface (`Serializer`: static serialize/deserialize)."""

from scaler.payload.serializer import Serializer

__all__ = ["Serializer"]
