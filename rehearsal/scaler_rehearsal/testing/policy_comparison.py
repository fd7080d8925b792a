"""`python -m scaler.testing.policy_comparison`: the command earlier docs named, kept working as an alias.

The comparison lives in `scaler.policy_simulator.comparison`; run as a program, this module hands its command line
to it. Importing this module does nothing.
"""

if __name__ == "__main__":
    import runpy

    runpy.run_module("scaler.policy_simulator.comparison", run_name="__main__", alter_sys=True)
