# Copied unchanged (below this header) from the reference implementation, finos/opengris-scaler,
# examples/ray_compat/basic_remote_cluster.py at commit e2289887cb1e83f4083cafd2f9f8bd10604d4391 (itself copied from Ray's documentation where it says so).
# Copyright the OpenGRIS Scaler authors; licensed under the Apache License, Version 2.0
# (https://www.apache.org/licenses/LICENSE-2.0).

"""This is a basic example showing the minimal changes needed to start using Scaler for a Ray application."""

import ray

from scaler.cluster.combo import SchedulerClusterCombo

# this patches the ray module
from scaler.compat.ray import scaler_init


# this is an example and we don't have a real remote cluster here
# so for demonstration purposes we just start a local cluster
def start_remote_cluster() -> SchedulerClusterCombo:
    return SchedulerClusterCombo(n_workers=1)


def main(address: str):
    # explicitly init the scaler
    # we explicitly provide the address of the remote scheduler
    scaler_init(address=address)

    @ray.remote
    def my_function():
        return 1

    # this is executed by the remote scaler cluster
    future = my_function.remote()
    assert ray.get(future) == 1


if __name__ == "__main__":
    combo = start_remote_cluster()
    main(combo.get_address())

    combo.shutdown()
