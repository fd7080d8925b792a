"""scaler's client in a browser (Pyodide): `scaler.browser.Client`, over a WebSocket to a cluster's `ws://` or `wss://`
address, with no thread and no C extension (docs/guide/browser.md)."""

from scaler.browser.client import Client

__all__ = ["Client"]
