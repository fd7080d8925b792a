"""The table of worker manager types (scaler/config/manager_types.py): every row names code that exists, rows do
not collide, and a local stack never imports a cloud type's code (its runner and backend are imported when that
type runs, by scaler/worker_manager/registry.py)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from scaler.config.manager_types import MANAGER_TYPES, ManagerType, manager_type_of
from scaler.config.sections import SchedulerConfig, WorkerManagerSettings

ROOT = Path(__file__).resolve().parents[2]


def defines_function(path: str) -> bool:
    """Whether the "module:function" path names a top-level function, found by parsing the module (importing
    it would need its cloud SDK, which the pure tiers' environments do not have)."""
    module_name, _, function_name = path.partition(":")
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        return False
    tree = ast.parse(Path(spec.origin).read_text())
    return any(isinstance(node, ast.FunctionDef) and node.name == function_name for node in tree.body)


@pytest.mark.parametrize("row", MANAGER_TYPES.values(), ids=lambda row: row.name)
def test_a_row_names_its_runner_and_backend_and_is_found_by_its_settings(row: ManagerType) -> None:
    assert row.name == next(name for name, other in MANAGER_TYPES.items() if other is row)
    assert defines_function(row.runner), row.runner
    if row.offload is not None:
        assert defines_function(row.offload.backend), row.offload.backend
    settings = row.section.__new__(row.section)  # the values do not matter, the section does
    assert manager_type_of(settings) is row
    assert row.toml_sections[0] == f"worker_manager[type={row.name}]"


def test_rows_do_not_collide() -> None:
    rows = list(MANAGER_TYPES.values())
    prefixes = [row.worker_type for row in rows]
    assert len(set(prefixes)) == len(rows), prefixes  # a worker id tells its manager type
    assert all(prefix and "|" not in prefix and "-" not in prefix for prefix in prefixes), prefixes
    assert len({row.section for row in rows}) == len(rows)
    tables = [table for row in rows for table in row.toml_tables]
    assert len(set(tables)) == len(tables), tables


def test_settings_of_no_type_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="SchedulerConfig is not the settings section of a worker manager type"):
        manager_type_of(SchedulerConfig(bind_address="tcp://127.0.0.1:1"))  # type: ignore[arg-type]
    assert issubclass(MANAGER_TYPES["symphony"].section, WorkerManagerSettings)


LOCAL_STACK = """
import sys
from scaler.cluster.launcher import Launcher
from scaler.config.loader import load_launcher_file, load_worker_manager
from scaler.config.manager_types import MANAGER_TYPES
from scaler.entry_points import launcher, worker_adapter, worker_manager
from scaler.worker_manager import process, registry

config = registry.with_manager_id(load_worker_manager(["baremetal_native", "tcp://127.0.0.1:1"]))
runner = registry.runner_of(MANAGER_TYPES["baremetal_native"])
cloud = ("boto3", "botocore", "moto", "soamapi", "scaler_rehearsal.fake_cloud", "scaler.worker_manager.aws",
         "scaler.worker_manager.orb_aws_ec2", "scaler.worker_manager.symphony", "scaler.worker_manager.offload.proxy")
print(" ".join(sorted(name for name in sys.modules if name.startswith(cloud))))
"""


def test_a_local_stack_imports_no_cloud_code() -> None:
    """Everything a native manager's command, `scaler FILE` and their child processes import, plus the native
    runner: no cloud SDK and no other type's code. Checked by importing every row's runner in registry.py at
    import time: the test then fails, naming the cloud managers' modules."""
    finished = subprocess.run(
        [sys.executable, "-c", LOCAL_STACK], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == []
