"""docs/guide/migrating.md lists the conformance tier's exclusions as exclusions.py has them, each of a known kind."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conformance import exclusions

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "migrating.md"


def test_the_page_lists_the_exclusions_as_exclusions_py_has_them() -> None:
    found = re.search(r"<!-- conformance-exclusions:[^\n]*-->\n(.*?)\n<!-- /conformance-exclusions -->",
                      PAGE.read_text(), re.DOTALL)  # fmt: skip
    assert found is not None, f"{PAGE} has no conformance-exclusions block"
    assert found.group(1) == exclusions.markdown_table(), (
        "the page's table differs from tests/conformance/exclusions.py: paste "
        "`python -c 'from tests.conformance.exclusions import markdown_table; print(markdown_table())'` into it"
    )


def test_every_exclusion_is_of_a_known_kind_and_suite() -> None:
    for exclusion in exclusions.EXCLUSIONS:
        assert exclusion.kind in exclusions.KINDS, exclusion
        assert exclusion.suite in exclusions.SUITES, exclusion
