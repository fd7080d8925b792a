"""The scale harness (issue 58): the real scheduler process against fake workers and clients that speak its
protocol, along three axes (workers, clients, queue). `python -m scale --help`; scale/README.md."""
