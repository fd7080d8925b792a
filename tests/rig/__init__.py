"""A rig of hosts on this machine, for tests and benchmarks of what crosses between hosts (issue 74): see rig.py."""

from tests.rig.network import LinkBytes, RigError, Shaping
from tests.rig.rig import MBIT, Host, HostMemory, Rig, RigProcess, unavailable

__all__ = ["MBIT", "Host", "HostMemory", "LinkBytes", "Rig", "RigError", "RigProcess", "Shaping", "unavailable"]
