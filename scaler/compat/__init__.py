"""Front ends for code written against other systems: `scaler.compat.ray` (Ray's core API), `scaler.compat.dask`
(Dask collections on our scheduler), `scaler.compat.joblib` (a joblib backend; `import scaler.joblib` registers it).

Each one translates the other system's calls into `Client` calls and owns nothing else: tasks, objects and graphs
go through the client's own machinery.
"""
