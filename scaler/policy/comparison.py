"""`python -m scaler.policy.comparison`: kept so that this command goes on working.

The comparison now runs the real scheduler core (`scaler.testing.policy_comparison`), which sits in
a layer above `scaler.policy`, so this module does not import it: run as a program, it hands the
command line to that one, as a shell alias would. Importing this module imports nothing.
"""

if __name__ == "__main__":
    import runpy

    runpy.run_module("scaler.testing.policy_comparison", run_name="__main__", alter_sys=True)
