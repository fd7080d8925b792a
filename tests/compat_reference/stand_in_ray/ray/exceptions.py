"""The stand-in's `ray.exceptions` (scaler.compat.ray sets its error types here, as on Ray's)."""
