"""Task-offloading managers (`aws_hpc`, `symphony`): their units are local proxy workers that run every task as
a job of a remote system. The whole offload path is here, one mechanism for all of them: `proxy_process` runs a
proxy (a worker agent around `executor.OffloadExecutor`), `proxy_units` starts and stops proxies as the native
backend starts workers; a remote system only adds an `OffloadBackend` (`backend.py`: submit, poll, cancel) and its
row's `offload` in `scaler.config.manager_types`. The bundle a job carries is `scaler.payload.remote_bundle`'s."""
