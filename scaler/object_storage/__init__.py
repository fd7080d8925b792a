"""Object storage: where task functions, arguments and results live as bytes.

- `store`: the pure object table (ids, owners, sizes);
- `server`: the asyncio server in front of it (`python -m scaler.object_storage.server ADDRESS`);
- `client_core`: the client's protocol, pure (requests, replies, restarts, refusals, timeouts, the put gate); its
  shells: `connection` (blocking, lock-step: client, processors, tools), `put_pipeline` (blocking, puts pipelined
  from a thread: a client's arguments) and `async_connection` (asyncio: the scheduler).

Nothing is imported here, so that importing the pure `store` does not pull in zmq.
"""
