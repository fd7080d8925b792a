"""The simulation doubles: a fake clock, an in-memory network, simulated clients and processors, and the stacks and
clusters the simulation tier builds of them around the real cores and shells."""
