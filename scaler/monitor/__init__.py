"""Readers of the scheduler's monitor feed: the feed reader, `scaler_top`, the web dashboard, `/metrics`."""
