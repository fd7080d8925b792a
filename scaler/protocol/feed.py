"""The monitor feed's topics: which message travels under which ZeroMQ PUB topic (docs/protocol.md)."""

from __future__ import annotations

from scaler.protocol import messages as m

STATUS_TOPIC = b"status"
TASKS_TOPIC = b"tasks"
SCALING_TOPIC = b"scaling"

#: Every message the scheduler publishes, and its topic. A subscriber picks topics by prefix.
FEED_TOPICS: dict[type, bytes] = {
    m.StatusSnapshot: STATUS_TOPIC,
    m.TaskTransitions: TASKS_TOPIC,
    m.ScalingDecisions: SCALING_TOPIC,
}
