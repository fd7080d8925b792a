"""Transport: addresses, event loops and ZeroMQ sockets driven by asyncio."""
