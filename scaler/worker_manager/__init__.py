"""Worker managers: start and stop workers so that their number follows the scheduler's target.

- `backend`: the contract a provisioning backend implements (`UnitBackend`: launch, list_units,
  terminate, close), the units it reports (`UnitInfo`) and what it launches (`LaunchSpec`);
- `reconciler`: the pure decision of what to launch and what to terminate;
- `runner`: the asyncio shell every manager type shares (scheduler link, heartbeats, reconcile loop);
- `baremetal_native`: the local-process backend; `native.run_native_manager` runs it in dynamic mode.

See docs/worker_managers.md.
"""
