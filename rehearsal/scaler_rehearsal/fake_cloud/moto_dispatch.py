"""moto's server finding each request's service without listing its own package folder for it.

moto's dispatcher asks, for every request, whether the request's host names one of moto's service modules, and lists
them anew each time (`moto.backends.list_of_moto_modules`: a directory listing and a `stat` for each of its 160-odd
folders). The fake cloud answers every API call of the tests and of the managers they start (each lists its units
every second): the list is read once here, which takes about a quarter of the CPU of answering a short call.

`install()` patches `moto.backends` and returns what undoes it (`FakeCloud.stop`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def install() -> Callable[[], None]:
    from moto import backends

    original = backends.list_of_moto_modules
    modules = tuple(original())

    def listed_once() -> Iterable[str]:
        return modules

    backends.list_of_moto_modules = listed_once

    def undo() -> None:
        backends.list_of_moto_modules = original

    return undo
