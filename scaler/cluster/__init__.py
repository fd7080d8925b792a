"""Local clusters: child process handling, fixed worker pools, SchedulerClusterCombo."""
