"""The documentation site's pages, read as files (the site's build and its walk in a browser are
tests/integration/test_docs_site.py):

- every page of docs/ and docs/guide/ is in the navigation (a toctree of docs/index.md), and every entry there is a
  page: a page added without a place in the navigation fails here, naming it and where to add it;
- a page for users names files as a pip user has them: a page of the site or `scaler --docs NAME`, never a path of
  the repository (docs/*.md, benchmarks/, tests/, docker/), except where its paragraph says it is in a clone; the
  pages under the navigation's "For contributors" caption may name any, and so may a section whose heading says
  "(for contributors)" (or is "For developers");
- every `{{ default.SECTION.KEY }}` names a setting, and every number a user page gives as the default of a setting
  it names (`name` ... default N, N ... by default) is that setting's declared default.

Checked by switching each off: a page left out of docs/index.md, a `docs/scaling.md` put back in a guide page, a
default of 30 written for `client_timeout_seconds`, each fails its test.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from scaler.config.doc_values import defaults, fill, placeholders, sections

DOCS = Path(__file__).resolve().parents[2] / "docs"
INDEX = DOCS / "index.md"
CONTRIBUTORS = "For contributors"

_TOCTREE = re.compile(r"^```\{toctree\}\n(.*?)^```", re.M | re.S)


def navigation() -> dict[str, list[str]]:
    """The toctrees of docs/index.md: caption -> the pages it lists (paths under docs/ without `.md`)."""
    found: dict[str, list[str]] = {}
    for block in _TOCTREE.findall(INDEX.read_text()):
        caption, entries = "", []
        for line in block.splitlines():
            if line.startswith(":caption:"):
                caption = line.removeprefix(":caption:").strip()
            elif line.strip() and not line.startswith(":"):
                entries.append(line.strip())
        found[caption] = entries
    return found


def pages() -> set[str]:
    """Every page of the site: docs/*.md and docs/guide/*.md, without `.md`."""
    return {str(page.relative_to(DOCS).with_suffix("")) for page in [*DOCS.glob("*.md"), *DOCS.glob("guide/*.md")]}


def user_pages() -> list[str]:
    contributors = set(navigation().get(CONTRIBUTORS, []))
    return sorted(pages() - contributors)


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page() -> None:
    listed = {entry for entries in navigation().values() for entry in entries} | {"index"}
    missing = sorted(pages() - listed)
    assert not missing, (
        f"in no navigation: {missing}; add each to a toctree of docs/index.md (the guide's pages under "
        f'"User guide", in the order of docs/guide/README.md)'
    )
    assert not listed - pages(), f"docs/index.md lists pages that do not exist: {sorted(listed - pages())}"
    assert CONTRIBUTORS in navigation(), f'docs/index.md has no "{CONTRIBUTORS}" toctree'


#: A path of the repository that a pip user does not have.
REPOSITORY_PATH = re.compile(r"(?<![\w/.-])((?:docs|benchmarks|tests|docker)/(?:[\w/.-]*[\w/])?)")
_FENCE = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.M | re.S)


def blocks(text: str) -> list[str]:
    """A page's paragraphs and code blocks (a code block whole, whatever blank lines it holds)."""
    found: list[str] = []
    end = 0
    for fence in _FENCE.finditer(text):
        found += text[end : fence.start()].split("\n\n")
        found.append(fence.group(0))
        end = fence.end()
    return found + text[end:].split("\n\n")


_COMMENT = re.compile(r"<!--.*?-->", re.S)
#: A heading whose section is for contributors: the page's readers see that it is not for them.
_CONTRIBUTORS_HEADING = re.compile(
    r"^(#+) .*\((?:for contributors|for developers)\)$|^(#+) For (?:contributors|developers)$"
)


def for_users(text: str) -> str:
    """A page without its sections for contributors (a heading that says so, to the next heading of its level or
    above) and its HTML comments (which the site does not show)."""
    kept: list[str] = []
    skipping_below = 0  # the level of the heading being skipped; 0: keeping
    for line in _COMMENT.sub("", text).splitlines():
        heading = re.match(r"^(#+) ", line)
        if heading and skipping_below and len(heading.group(1)) <= skipping_below:
            skipping_below = 0
        marked = _CONTRIBUTORS_HEADING.match(line)
        if marked:
            skipping_below = len(marked.group(1) or marked.group(2))
        if not skipping_below:
            kept.append(line)
    return "\n".join(kept)


def repository_paths(text: str) -> list[str]:
    """The repository paths a page names for its users outside the paragraphs that say they are in a clone."""
    return [
        path
        for block in blocks(for_users(text))
        if "clone" not in block.lower()
        for path in REPOSITORY_PATH.findall(block)
    ]


def test_user_pages_name_files_as_a_pip_user_has_them() -> None:
    found = {page: paths for page in user_pages() if (paths := repository_paths((DOCS / f"{page}.md").read_text()))}
    assert not found, (
        f"pages for users naming repository paths: {found}; link the page instead ([the scaling page](scaling.md)) "
        f"or name `scaler --docs NAME`, or say in the paragraph that the file is in a clone"
    )


def test_the_path_check_sees_a_path_and_spares_a_clone() -> None:
    assert repository_paths("See `docs/scaling.md` for more.") == ["docs/scaling.md"]
    assert repository_paths("Measured by benchmarks/run.py.\n\nIn a clone, `docker/worker.Dockerfile`.") == [
        "benchmarks/run.py"
    ]
    assert repository_paths("`scaler --docs scaling`, https://example.org/docs/x.md") == []
    assert repository_paths(
        "# Page\n\n## 12. Tests (for contributors)\n\n`tests/a.py`\n\n## 13. Next\n\n`tests/b.py`"
    ) == ["tests/b.py"]
    assert repository_paths("<!-- generated from tests/x.py -->\nText.") == []


def test_every_placeholder_names_a_setting() -> None:
    for page in sorted(pages()):
        text = (DOCS / f"{page}.md").read_text()
        for section, key in placeholders(text):
            assert key in defaults().get(section, {}), f"{page}.md: {{{{ default.{section}.{key} }}}} is no setting"
        assert "{{ default." not in fill(text).replace("`{{ default.", ""), page


def numeric_defaults() -> dict[str, set[float]]:
    """Every setting's name (its TOML key and its long flags) -> the numeric defaults it is declared with."""
    table: dict[str, set[float]] = {}
    for section in sections().values():
        for field in dataclasses.fields(section):
            default = field.default
            if isinstance(default, bool) or not isinstance(default, (int, float)):
                continue
            for name in (field.name, "--" + field.name.replace("_", "-")):
                table.setdefault(name, set()).add(float(default))
    return table


_NUMBER = r"(-?\d[\d,]*(?:\.\d+)?)"
#: What a page says a default is, in the clause after a setting's name: "default 60", "(default: 60",
#: "60 s by default", "60 by default", "(60 s; ...".
_UNIT = r"(?:\s*(s|seconds|tasks|KiB|MiB|GiB)\b)?"
_BYTES = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
_STATED = re.compile(
    rf"default:?\s+`?{_NUMBER}`?{_UNIT}|`?{_NUMBER}`?{_UNIT}\)?\s+by default"
    # a number in brackets right after the name: "`--unrunnable-grace-seconds` (60 s; 0 waits for ever)"
    rf"|^\s*\(`?{_NUMBER}`?{_UNIT}(?:\)|$)"
)
#: A setting's name as pages write it: a long flag, or a TOML key with an underscore (`timeout` alone is too common
#: a word: a keyword of many calls).
_NAMED = re.compile(r"`(--[a-z][a-z0-9-]+|[a-z][a-z0-9]*_[a-z0-9_]+)`")


def stated_defaults(text: str) -> list[tuple[str, float]]:
    """(setting, number) for every default a text states right after naming the setting, in the same clause."""
    table = numeric_defaults()
    found = []
    for named in _NAMED.finditer(text):
        if named.group(1) not in table:
            continue
        clause = re.split(r"\.\s|;|\||\n\n|`[a-z-][a-z0-9_-]*`", text[named.end() : named.end() + 120])[0]
        stated = _STATED.search(clause)
        if stated:
            groups = stated.groups()
            number, unit = next((groups[i], groups[i + 1]) for i in range(0, len(groups), 2) if groups[i] is not None)
            found.append((named.group(1), float(number.replace(",", "")) * _BYTES.get(unit or "", 1)))
    return found


def test_the_defaults_user_pages_state_are_the_declared_ones() -> None:
    table = numeric_defaults()
    wrong = []
    for page in user_pages():
        for name, number in stated_defaults(fill((DOCS / f"{page}.md").read_text())):
            if number not in table[name]:
                wrong.append(f"{page}.md: `{name}` default {number:g}, declared {sorted(table[name])}")
    assert not wrong, "defaults that are not the settings' (write {{ default.SECTION.KEY }} instead): " + "; ".join(
        wrong
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("`client_timeout_seconds` (default 60 s): a client", [("client_timeout_seconds", 60.0)]),
        ("`--task-log-max-size`, 100,000 by default", [("--task-log-max-size", 100000.0)]),
        ("`worker_timeout_seconds`. Later, default 5", []),
        ("`max_task_retries` is `3` by default", [("max_task_retries", 3.0)]),
        ("past `--client-resume-seconds` (1800; the client may ask for less)", [("--client-resume-seconds", 1800.0)]),
        ("`max_task_retries` (0, 1 or 2 are common)", []),
    ],
)
def test_the_default_check_reads_what_a_page_states(text: str, expected: list[tuple[str, float]]) -> None:
    assert stated_defaults(text) == expected


def test_scaler_docs_prints_a_page_with_the_defaults_filled_in() -> None:
    """`scaler --docs NAME` shows what the site shows: the troubleshooting page's wait for a lost scheduler names the
    scheduler's resume window as declared, not a placeholder."""
    from scaler.config.installed_docs import page_text

    text = page_text("troubleshooting")
    assert "{{ default." not in text
    assert f"({defaults()['scheduler']['client_resume_seconds']} s by default" in text
