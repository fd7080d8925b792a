"""The systems under test and their virtual environments under `benchmarks/.venvs/<system>`.

Each system gets its own venv because `ours` and `opengris-scaler` are both imported as `scaler`. A venv is
(re)built when its stamp (base interpreter, pip arguments, for `ours` a hash of pyproject.toml) changes; `ours` is an
editable install, so source edits need no rebuild.
"""

import hashlib
import json
import os
import subprocess
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = BENCH_DIR.parent
VENVS_DIR = BENCH_DIR / ".venvs"
WORKLOAD_MAIN = BENCH_DIR / "workloads" / "main.py"

# The workload side samples processes with psutil; the workloads shaped like users' days (U1-U4) need numpy, pandas
# and scikit-learn (with joblib) in every system's venv, the same versions everywhere.
COMMON_REQUIREMENTS = ["psutil", "numpy==2.4.6", "pandas==3.1.1", "scikit-learn==1.9.1"]
REQUIREMENTS: dict[str, list[str]] = {
    "ours": ["-e", str(REPO_ROOT)],
    "opengris": ["opengris-scaler==2.9.0"],
    "dask": ["dask[distributed]==2026.8.0"],
    "ray": ["ray==2.60.0"],
}
#: `ours-before`: our own code at an earlier commit, to measure a change before and after with the runs alternated;
#: it exists when SCALER_BENCH_BEFORE names a source tree (e.g. `git worktree add /tmp/before <commit>`).
BEFORE_TREE = os.environ.get("SCALER_BENCH_BEFORE", "")
if BEFORE_TREE:
    REQUIREMENTS["ours-before"] = ["-e", os.path.abspath(BEFORE_TREE)]
SYSTEMS = tuple(REQUIREMENTS)
#: Venvs of benchmarks beyond run.py's systems (actor_calls.py, laptop_link.py, shared_memory.py): ours with the
#: front ends' extras, and the systems they are compared with. Not in SYSTEMS: run.py's workloads do not run on them.
FRONTEND_REQUIREMENTS: dict[str, list[str]] = {
    "ours-frontends": ["-e", f"{REPO_ROOT}[joblib,dask]"],
    "ray": ["ray==2.60.0", "numpy"],
    # Ray Client (`ray://`): the client's and the head's gRPC (benchmarks/laptop_link.py)
    "ray-client": ["ray[client]==2.60.0"],
}
STAMP_NAME = ".bench-stamp"


class VenvError(RuntimeError):
    pass


def venv_python(system: str) -> Path:
    return VENVS_DIR / system / "bin" / "python"


def _requirements(system: str) -> list[str]:
    return REQUIREMENTS[system] if system in REQUIREMENTS else FRONTEND_REQUIREMENTS[system]


def _stamp(system: str, base_python: str) -> str:
    content: dict[str, object] = {"pip": _requirements(system) + COMMON_REQUIREMENTS}
    content["python"] = os.path.realpath(base_python)
    if system.startswith("ours"):
        tree = Path(BEFORE_TREE) if system == "ours-before" else REPO_ROOT
        content["pyproject"] = hashlib.sha256((tree / "pyproject.toml").read_bytes()).hexdigest()
        content["tree"] = str(tree.resolve())
    return json.dumps(content, sort_keys=True)


def ensure_venv(system: str, base_python: str) -> Path:
    """Creates or refreshes the system's venv; returns its python. Raises VenvError with pip's output tail."""
    venv = VENVS_DIR / system
    python = venv_python(system)
    stamp_file = venv / STAMP_NAME
    stamp = _stamp(system, base_python)
    if python.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return python
    print(f"[setup] building venv for {system} in {venv} ...", flush=True)
    log = venv.parent / f"{system}-install.log"
    venv.parent.mkdir(parents=True, exist_ok=True)
    commands = [
        [base_python, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", *_requirements(system), *COMMON_REQUIREMENTS],
    ]
    with open(log, "w") as out:
        for command in commands:
            out.write(f"$ {' '.join(command)}\n")
            out.flush()
            if subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode != 0:
                tail = "\n".join(log.read_text().splitlines()[-15:])
                raise VenvError(f"{system}: `{' '.join(command)}` failed (full log: {log}):\n{tail}")
    stamp_file.write_text(stamp)
    return python
