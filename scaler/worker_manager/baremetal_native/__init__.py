"""`baremetal_native`: units are local worker processes (see `backend.NativeBackend`)."""
