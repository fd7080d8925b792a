"""Readers of the scheduler's monitor feed (the base of scaler_top, the dashboard and /metrics)."""

from scaler.monitor.feed_reader import FeedReader

__all__ = ["FeedReader"]
