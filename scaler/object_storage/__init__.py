"""Object storage: where task functions, arguments and results live as bytes.

- `store`: the pure object table (ids, owners, sizes);
- `server`: the asyncio server in front of it (`python -m scaler.object_storage.server ADDRESS`);
- `connection`: the synchronous client used from plain threads (client, processors);
- `async_connection`: the pipelined client used from asyncio shells (scheduler, worker agent).

Nothing is imported here, so that importing the pure `store` does not pull in zmq.
"""
