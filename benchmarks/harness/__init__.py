"""Driver-side modules of the benchmark suite (run by benchmarks/run.py with any Python >= 3.10)."""
