"""The policy simulator: scaling policies replayed against task traces, on simulated time.

`cluster_simulation.simulate` runs a trace through the real scheduler core, a policy and a real `Reconciler` per
worker manager; `trace_replay` is what `scaler_simulate_policy` computes (one row per policy); `comparison` prints
docs/scaling.md's tables (`python -m scaler.policy_simulator.comparison`). It sits above the scheduler and the
worker managers, whose real code it runs, so it is a package of its own rather than a part of the pure
`scaler.policy` below them.
"""
