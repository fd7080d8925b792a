"""`type = "slurm"`: each worker a Slurm batch job (docs/guide/slurm.md, docs/worker_managers.md)."""
