"""The pure pieces behind the Dask front end, Ray's options and uploads (issue 59): gather and scatter over nested
containers, Dask's keys and timeouts, resources as capabilities, a worker's traceback text as a traceback object,
Ray's options warned of or refused, and uploads' sources and import hook."""

from __future__ import annotations

import sys
import traceback
import warnings
import zipfile
from io import BytesIO

import pytest

from scaler.client import gathering
from scaler.compat import dask_keys, ray_options
from scaler.compat.dask_futures import remote_traceback, seconds
from scaler.payload import uploads


class Box:
    def __init__(self, value: int, fails: bool = False) -> None:
        self.value = value
        self.fails = fails


def _value(box: Box) -> int:
    if box.fails:
        raise ZeroDivisionError("box")
    return box.value


def _is_box(value: object) -> bool:
    return isinstance(value, Box)


def test_gather_keeps_the_nesting_and_skips_failures_only_when_asked() -> None:
    nested = {"a": [Box(1), (Box(2), 3)], "b": {Box(4)}, "c": "text"}
    assert gathering.gather(nested, _is_box, _value) == {"a": [1, (2, 3)], "b": {4}, "c": "text"}
    assert gathering.gather(Box(5), _is_box, _value) == 5
    with pytest.raises(ZeroDivisionError):
        gathering.gather([Box(1), Box(2, fails=True)], _is_box, _value)
    assert gathering.gather([Box(1), Box(2, fails=True)], _is_box, _value, errors="skip") == [1]
    with pytest.raises(ZeroDivisionError):  # a bare failed one raises even when skipping
        gathering.gather(Box(2, fails=True), _is_box, _value, errors="skip")
    assert gathering.futures_in(nested, _is_box)[0].value == 1


def test_scatter_stores_the_top_level_items() -> None:
    stored: list[object] = []

    def store(value: object) -> str:
        stored.append(value)
        return f"ref{len(stored)}"

    assert gathering.scatter([1, 2], store) == ["ref1", "ref2"]
    assert gathering.scatter({"x": 3}, store) == {"x": "ref3"}
    assert gathering.scatter(iter([4]), store) == ["ref4"]
    assert gathering.scatter(5, store) == "ref5"


def test_dask_keys_are_the_same_for_the_same_call_when_pure() -> None:
    first = dask_keys.key_of(sum, ([1, 2],), {}, pure=True)
    assert first == dask_keys.key_of(sum, ([1, 2],), {}, pure=True) and first.startswith("sum-")
    assert dask_keys.key_of(sum, ([1, 2],), {}, pure=False) != dask_keys.key_of(sum, ([1, 2],), {}, pure=False)
    assert dask_keys.funcname(lambda: 1) == "lambda"


def test_resources_are_capabilities_of_whole_amounts() -> None:
    assert dask_keys.capabilities_of({"GPU": 1, "big": 2.0}) == {"GPU": 1, "big": 2}
    assert dask_keys.capabilities_of(None) is None
    with pytest.raises(ValueError, match="fraction"):
        dask_keys.capabilities_of({"GPU": 0.5})
    with pytest.raises(NotImplementedError, match="workers="):
        dask_keys.refuse_placement(["tcp://w"], False)


def test_retries_call_again_in_the_same_process() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OSError("not yet")
        return "done"

    assert dask_keys.with_retries(flaky, 2)() == "done"
    calls.clear()
    with pytest.raises(OSError):
        dask_keys.with_retries(flaky, 1)()


def test_dask_timeouts_in_seconds_or_text() -> None:
    assert seconds(None) is None and seconds(2) == 2
    assert seconds("10 ms") == pytest.approx(0.01) and seconds("1.5s") == 1.5 and seconds("2 minutes") == 120
    with pytest.raises(ValueError, match="duration"):
        seconds("soon")


def test_a_worker_s_traceback_text_becomes_a_traceback_object() -> None:
    text = (
        "Traceback (most recent call last):\n"
        f'  File "{__file__}", line 10, in outer\n    x\n'
        '  File "/nowhere/task.py", line 3, in div\n    return x / y\n'
        "ZeroDivisionError: division by zero\n"
    )
    frames = traceback.extract_tb(remote_traceback(text))
    assert [(frame.filename, frame.lineno, frame.name) for frame in frames] == [
        (__file__, 10, "outer"), ("/nowhere/task.py", 3, "div"),
    ]  # fmt: skip
    assert remote_traceback("no frames here") is None


def test_ray_options_warn_once_refuse_or_name_the_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_options, "_warned", set())
    supported = frozenset({"num_cpus"})
    with pytest.warns(UserWarning, match="memory is accepted and not used"):
        ray_options.checked({"memory": 1, "num_cpus": 1}, supported, "ray.remote")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ray_options.checked({"memory": 1}, supported, "ray.remote")
    with pytest.raises(NotImplementedError, match="runtime_env is refused"):
        ray_options.checked({"runtime_env": {}}, supported, "ray.remote")
    with pytest.raises(NotImplementedError, match=r"nonsense is not supported .*num_cpus"):
        ray_options.checked({"nonsense": 1}, supported, "ray.remote")


def test_ray_s_size_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUNCTION_SIZE_ERROR_THRESHOLD", "1000")
    big = b"x" * 5000
    with pytest.raises(ValueError, match=r"The remote function f is too large"):
        ray_options.checked_size(lambda: big, "The remote function f")
    ray_options.checked_size(lambda: 1, "The remote function g")


def test_uploads_are_importable_by_name_and_a_newer_one_replaces_the_older() -> None:
    archive = BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("upload_unit_package/__init__.py", "ROOT = 1\n")
        zipped.writestr("upload_unit_package/inner.py", "VALUE = 2\n")
    package = uploads.Upload("upload_unit_package.zip", archive.getvalue())
    module = uploads.Upload("upload_unit_module.py", b"VALUE = 'first'\n")
    assert uploads.check(package) == ["upload_unit_package"]
    with pytest.raises(SyntaxError):
        uploads.check(uploads.Upload("broken.py", b"syntax-error!\n"))
    try:
        uploads.install([package, module])
        import upload_unit_module  # type: ignore[import-not-found]
        import upload_unit_package.inner  # type: ignore[import-not-found]

        assert upload_unit_package.ROOT == 1 and upload_unit_package.inner.VALUE == 2
        assert upload_unit_module.VALUE == "first"
        uploads.install([uploads.Upload("upload_unit_module.py", b"VALUE = 'second'\n")])
        import upload_unit_module as again  # type: ignore[import-not-found]

        assert again.VALUE == "second"
    finally:
        for name in ("upload_unit_module", "upload_unit_package", "upload_unit_package.inner"):
            sys.modules.pop(name, None)


def test_a_function_with_uploads_installs_them_before_it_is_unpickled() -> None:
    import cloudpickle

    wrapped = uploads.WithUploads(len, (uploads.Upload("upload_unit_other.py", b"X = 3\n"),))
    assert wrapped("abc") == 3 and wrapped.__name__ == "len"
    try:
        assert cloudpickle.loads(cloudpickle.dumps(wrapped)) is len
        import upload_unit_other  # type: ignore[import-not-found]

        assert upload_unit_other.X == 3
    finally:
        sys.modules.pop("upload_unit_other", None)
