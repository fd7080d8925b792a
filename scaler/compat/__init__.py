"""Front ends for code written against other systems: `scaler.compat.ray` (Ray's core API) and
`scaler.compat.joblib` (a joblib backend; `import scaler.joblib` registers it). (Dask needs no module here: a
client's `get` is a Dask scheduler, `scaler/client/dask_graph.py`.)

Each one translates the other system's calls into `Client` calls and owns nothing else: tasks, objects and graphs
go through the client's own machinery.
"""
