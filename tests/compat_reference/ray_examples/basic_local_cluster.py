# Copied unchanged (below this header) from the reference implementation, finos/opengris-scaler,
# examples/ray_compat/basic_local_cluster.py at commit e2289887cb1e83f4083cafd2f9f8bd10604d4391 (itself copied from Ray's documentation where it says so).
# Copyright the OpenGRIS Scaler authors; licensed under the Apache License, Version 2.0
# (https://www.apache.org/licenses/LICENSE-2.0).

"""This is a basic example showing the minimal changes needed to start using Scaler for a Ray application."""

import ray

# this patches the ray module
import scaler.compat.ray  # noqa: F401


def main():
    @ray.remote
    def my_function():
        return 1

    # Scaler is implicitly initialized on the first .remote() call using default settings.
    # See basic_remote_cluster.py for explicit initialization with custom settings.
    future = my_function.remote()
    assert ray.get(future) == 1

    # the implicitly-created cluster is globally-scoped
    # so we need to shut it down explicitly
    ray.shutdown()


if __name__ == "__main__":
    main()
