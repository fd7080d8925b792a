"""Client.submit, map, starmap and their futures carry the types of the function they run (#34 item 5).

mypy runs over tests/unit/typed/typed_client_example.py, a user's typed code: it must report an error on
each line whose comment starts with 'error' and on no other. Checked by switching the mechanism off: with submit typed
`(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> ScalerFuture` again, the four submit lines pass
unnoticed and this test fails.

mypy keeps its cache of what it read (scaler's modules, the standard library's stubs) in the checkout's .mypy_cache,
in a folder of this test's own (`make typecheck` runs with other options); it checks each cached module against its
source, so a change to the client's types is seen on the next run (the mechanism switched off as above with the cache
warm fails this test too). A cold cache takes about 4 s of CPU, a warm one 0.1 s.
"""

from __future__ import annotations

import pathlib
import re

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy comes with the dev extra (make test installs it)")

EXAMPLE = pathlib.Path(__file__).parent / "typed" / "typed_client_example.py"
CACHE = pathlib.Path(__file__).resolve().parents[2] / ".mypy_cache" / "typed_client_example"


@pytest.mark.timeout(180)
def test_mypy_sees_the_types_of_submitted_functions() -> None:
    expected = {
        number
        for number, line in enumerate(EXAMPLE.read_text().splitlines(), start=1)
        if re.search(r"\S.*  # error:", line)
    }
    out, err, _status = mypy_api.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(CACHE), "--follow-imports=silent",
         str(EXAMPLE)]
    )  # fmt: skip
    reported = {int(match.group(1)) for match in re.finditer(rf"{re.escape(EXAMPLE.name)}:(\d+): error", out)}
    assert reported == expected, f"mypy said:\n{out}{err}"
