"""No module of the client side reads another object's private members (issue 39, item 1): the front ends (Client,
AsyncClient, the Executor, jobs, Ray, joblib, Dask) reach the cluster through the public methods of one session
(`scaler/client/session.py`), and the storage side through its public clients.

The check walks the syntax tree for `obj._name` where `obj` is not `self`, `cls` or `super()` (a dunder is not
private). Before the session (commit 5d99cee) it found 50 such reads in these packages, 35 of them of `Client`'s
private names (13 names; `jobs.py` alone 20 reads of 11); checked to fail by reading `client.session._agent` in
`compat/joblib.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "scaler"

#: The packages the rule holds in.
PACKAGES = ("client", "compat", "object_storage", "payload")

#: Reads that stay, each with its reason.
ALLOWED = {
    # ScalerFuture is a concurrent.futures.Future: the state name its own `_state` takes lives in the stdlib module
    "concurrent.futures._base",
    # the Executor's exit hook runs where the standard library's pools' runs, before atexit's (client/executor.py)
    "threading._register_atexit",
}


def private_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        text = ast.unparse(node)
        if text not in ALLOWED:
            found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {text}")
    return found


def test_no_module_of_the_client_side_reads_private_members_of_another_object() -> None:
    reads = [read for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py")) for read in
             private_reads(path)]  # fmt: skip
    assert reads == [], "private members read from outside their object:\n" + "\n".join(reads)
