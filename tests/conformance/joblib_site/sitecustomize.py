"""joblib's "scaler" backend in the fresh interpreters that joblib's suite starts (its tests of functions defined in a
script's `__main__` run `python script.py` with `Parallel(backend=<the backend under test>)`): where
SCALER_CONFORMANCE_ADDRESS names a scheduler, "scaler" is registered as scaler's backend connected to it. The
conformance tier puts this folder on PYTHONPATH of those interpreters only (tests/conformance/test_joblib_parallel.py);
it plugs the backend in where joblib's own are always registered, and changes nothing of the scripts."""

import functools
import os

if os.environ.get("SCALER_CONFORMANCE_ADDRESS"):
    from joblib import register_parallel_backend

    from scaler.compat.joblib import ScalerBackend

    address = os.environ["SCALER_CONFORMANCE_ADDRESS"]
    register_parallel_backend("scaler", functools.partial(ScalerBackend, address=address))
