"""`python -m scaler.policy.comparison`: the documented command for the policy comparison, kept working.

The comparison replays traces against the real scheduler core (`scaler.policy_simulator.comparison`), a
layer above `scaler.policy`, so this module imports nothing from it: run as a program, it hands its
command line to that module as an alias would. Importing this module does nothing.
"""

if __name__ == "__main__":
    import runpy

    runpy.run_module("scaler.policy_simulator.comparison", run_name="__main__", alter_sys=True)
