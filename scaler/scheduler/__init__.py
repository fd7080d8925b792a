"""The scheduler: a pure core (`core/`) that decides, and an asyncio shell (`server.py`) that moves bytes."""
