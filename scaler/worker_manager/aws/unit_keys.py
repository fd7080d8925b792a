"""CURVE keys for the workers a cloud manager starts (docs/security.md, "Keys as text").

The manager's own key files mean nothing on a unit, so a unit's settings carry no key path; its workers read the
keys' text from two environment variables instead (`scaler.security.curve.SECRET_KEY_TEXT_VARIABLE`,
`SERVER_KEY_TEXT_VARIABLE`). They travel in the unit's one-time manifest (`aws.shipping`), which the unit reads
through a presigned URL and deletes: never in a launch request, a task definition, user data or a log line.
"""

from __future__ import annotations

import dataclasses

from scaler.config.sections import WorkerConfig
from scaler.security.curve import key_texts, security_of
from scaler.worker_manager.backend import LaunchSpec


def unit_key_texts(spec: LaunchSpec) -> dict[str, str]:
    """The variables that give a unit's workers the manager's keys ({} when the manager has none)."""
    security = security_of(spec.worker)
    return key_texts(security) if security is not None else {}


def without_key_paths(config: WorkerConfig) -> WorkerConfig:
    """A unit's worker settings: the manager's key file paths dropped (the workers take the text variables)."""
    return dataclasses.replace(config, curve_secret_key=None, curve_server_key=None)
