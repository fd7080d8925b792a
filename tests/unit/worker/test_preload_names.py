"""`--preload` and `--preimport` texts checked before a worker starts (scaler/worker/preload.py)."""

from __future__ import annotations

import sys

import pytest

from scaler.errors import PreloadError
from scaler.worker.preload import check_preimport, parse_preload, preimport


@pytest.mark.parametrize("names", [(), ("numpy",), ("sklearn.svm", "json"), ("_private.mod_2",)])
def test_module_names_pass(names: tuple[str, ...]) -> None:
    check_preimport(names)


@pytest.mark.parametrize("name", ["", "numpy;rm", "pkg..mod", "pkg.", "2to3", "pkg.mod:func", "a b"])
def test_what_is_no_module_name_is_refused_by_name(name: str) -> None:
    with pytest.raises(PreloadError, match="bad --preimport"):
        check_preimport(("json", name))


def test_preimport_imports_in_order_and_names_the_module_that_failed() -> None:
    sys.modules.pop("colorsys", None)
    with pytest.raises(PreloadError, match="cannot import module 'no_such_module_here': ModuleNotFoundError"):
        preimport(("colorsys", "no_such_module_here", "wave"))
    assert "colorsys" in sys.modules


def test_preload_text_forms() -> None:
    spec = parse_preload("pkg.mod:configure('prod', debug=False)")
    assert (spec.module, spec.function) == ("pkg.mod", "configure")
    assert (spec.args, spec.kwargs) == (("prod",), (("debug", False),))
    with pytest.raises(PreloadError, match="expected"):
        parse_preload("pkg.mod")
