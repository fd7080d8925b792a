"""A host cache: the object storage server's code in a cache role, one per host and upstream storage server, so that
the processors of a host other than the storage's map one copy of each object (docs/architecture.md, "One copy per
host: host caches").

- `cache_rules`: the cache role's rules (pure), used by the server's `StorageService`;
- `upstream`: the shell's fetches, uploads and checks against the upstream server, on threads;
- `place`: where a host's cache is found (its lock and address in the host's shared memory), started and left;
- `ledger`: what the cache holds and the bytes it moved;
- `__main__`: the process (`python -m scaler.object_storage.host_cache '<settings as JSON>'`).

Nothing is imported here, so that importing the pure `cache_rules` does not pull in zmq.
"""
