"""The stand-in's `ray.util` (scaler.compat.ray sets its helpers here, as on Ray's)."""
