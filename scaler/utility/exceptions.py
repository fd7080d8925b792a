"""Compatibility path for `from scaler.utility.exceptions import ...`; the exceptions live in `scaler.errors`."""

from scaler.errors import *  # noqa: F403
from scaler.errors import __all__  # noqa: F401
