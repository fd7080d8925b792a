"""The benchmark on the rig of hosts (issue 74): `benchmarks/rig_hosts.py` runs it."""
