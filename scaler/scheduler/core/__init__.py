"""The scheduler's pure core: events in, effects out. No asyncio, zmq, time or random in here."""
