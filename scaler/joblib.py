"""`import scaler.joblib` registers joblib's "scaler" backend (scaler/compat/joblib.py): then

    with joblib.parallel_config(backend="scaler", address="tcp://127.0.0.1:8516"):
        joblib.Parallel(n_jobs=-1)(joblib.delayed(f)(x) for x in data)

joblib finds third-party backends only by registration (it reads no entry points), hence this import.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("joblib") is None:
    raise ModuleNotFoundError(
        "scaler.joblib needs joblib, which is not installed: pip install 'scaler-compute[joblib]' (or pip install "
        "joblib)",
        name="joblib",
    )

from scaler.compat.joblib import ScalerBackend, register  # after the check that names the extra

register()

__all__ = ["ScalerBackend", "register"]
