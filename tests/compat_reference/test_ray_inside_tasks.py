"""Ray code that calls Ray inside its tasks and actors (issue 77, item 12): Ray's own test_basic_2.py defines and calls
remote functions inside tasks (`test_defining_remote_functions`, `test_redefining_remote_functions`), hands actors
and references to tasks and actors (`test_call_matrix`, `test_actor_pass_by_ref_order_optimization`); with Ray
installed, those failed with "Ray has not been started yet" raised inside the task. A task's function names `ray`,
which its processor imports by name: Ray's own module, unpatched, unless scaler.compat.ray is installed there too,
which a processor forked from the driver inherits but one of a cluster started apart (a cluster host that is a fresh
interpreter, as under pytest, or a cluster of its own) does not have.

The driver runs in a process of its own, with `stand_in_ray/` on the path as Ray's package (it says why), and a
second thread, so that `ray.init` starts its cluster from a fresh interpreter; the calls are the kinds of the tests
named above, written here. Checked to fail before (`install_ray_api` not called where a remote call or an actor runs):
"RuntimeError: Ray has not been started yet" from the first task that names `ray`. Also run by hand with Ray 2.60 in
the place of the stand-in, before (the same error) and after (it passes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(300)]

STAND_IN = Path(__file__).resolve().parent / "stand_in_ray"

DRIVER = """
import threading
import time

import ray
import scaler.compat.ray  # noqa: F401  (patches the `ray` on the path, as it patches Ray's)

assert ray.__file__.startswith(STAND_IN), ray.__file__
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()  # the cluster host: a fresh interpreter
ray.init(num_cpus=2)
try:
    # first, in processors that have run nothing yet: a task whose function names only `ray`
    @ray.remote
    def defines_its_own(i):
        @ray.remote
        def inner():
            return i

        return inner.remote()

    refs = [defines_its_own.remote(i) for i in range(4)]
    assert [ray.get(ray.get(ref, timeout=120), timeout=120) for ref in refs] == [0, 1, 2, 3]

    @ray.remote
    def add_one(x):
        return x + 1

    @ray.remote
    def add_one_inside(x):
        return ray.get(add_one.remote(x))

    @ray.remote
    def twice_inside(x):
        return ray.get(add_one_inside.remote(x))

    assert ray.get(twice_inside.remote(1), timeout=120) == 2

    @ray.remote
    class Echo:
        def echo(self, x):
            return ray.get(x[0]) if isinstance(x, list) else x

    @ray.remote
    def echo_in_a_task(x):
        return ray.get(x[0]) if isinstance(x, list) else x

    @ray.remote
    def calls_the_actor(actor, function):
        return ray.get(actor.echo.remote(function.remote(5)))

    actor = Echo.remote()
    assert ray.get(actor.echo.remote([add_one.remote(1)]), timeout=120) == 2
    assert ray.get(echo_in_a_task.remote([add_one.remote(2)]), timeout=120) == 3
    assert ray.get(calls_the_actor.remote(actor, add_one), timeout=120) == 6
finally:
    ray.shutdown()
print("ok")
"""


def test_ray_calls_inside_tasks_and_actors_reach_the_tasks_cluster(tmp_path: Path) -> None:
    path = os.pathsep.join(filter(None, [str(STAND_IN), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", f"STAND_IN = {str(STAND_IN)!r}\n{DRIVER}"], cwd=tmp_path, env=environment,
        capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "ok" in done.stdout.split(), output[-4000:]
