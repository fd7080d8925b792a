"""The pages that ship, as a terminal shows them (`scaler --docs NAME`) and as the site the package renders shows
them (`scaler --docs --open`, `--serve PORT`): issue 77, item 5. The browser walks the rendered site in
tests/integration/test_installed_docs.py."""

from __future__ import annotations

import re

import pytest

from scaler.config.docs_site import inline_html, page_html
from scaler.config.docs_text import inline_text, page_of_link
from scaler.config.installed_docs import page_for_terminal, page_names, page_text
from scaler.config.manager_types import MANAGER_TYPES
from scaler.config.markdown_blocks import BlockKind, blocks, slug

#: How the index names each manager type's workers (a new type fails the test until the index names it).
INDEX_NAMES = {
    "baremetal_native": "local processes",
    "aws_raw_ecs": "AWS ECS tasks",
    "orb_aws_ec2": "EC2 instances",
    "aws_hpc": "AWS Batch jobs",
    "symphony": "IBM Symphony",
    "slurm": "Slurm jobs",
    "kubernetes": "Kubernetes pods",
}


@pytest.mark.parametrize("name", page_names())
def test_a_page_in_a_terminal_is_text_not_markup(name: str) -> None:
    """Checked to fail before: `scaler --docs api` printed its `<a href=...>` lines, `scaler --docs index` its
    ```` ```{toctree} ```` blocks, and every page the documentation tier's `<!-- doc-test: ... -->` comments."""
    text = re.sub(r"`[^`]*`", "", page_for_terminal(name))  # code may name markup (dependencies.md does)
    for markup in ("<!--", "```{", "<a href", "<code>", "{{ default.", ":caption:"):
        assert markup not in text, (name, markup)


def test_the_index_names_every_manager_type() -> None:
    assert set(INDEX_NAMES) == set(MANAGER_TYPES), "name the new manager type's workers in docs/index.md and here"
    text = " ".join(page_for_terminal("index").split())
    missing = [name for name, words in INDEX_NAMES.items() if words not in text]
    assert not missing, missing


def test_the_index_in_a_terminal_lists_its_pages_with_the_command_that_prints_them() -> None:
    text = page_for_terminal("index")
    assert re.search(r"^    scaler --docs guide/kubernetes +Workers on Kubernetes$", text, flags=re.M), text
    assert re.search(r"^    scaler --docs worker_managers +Worker managers$", text, flags=re.M), text


def test_a_link_to_a_page_names_the_command_that_prints_it() -> None:
    assert page_of_link("guide/bursting", "../scaling.md#policies") == "scaling"
    assert page_of_link("guide/bursting", "slurm.md") == "guide/slurm"
    assert page_of_link("index", "guide/quick_start.md") == "guide/quick_start"
    assert page_of_link("index", "https://example.org/x.md") is None
    assert inline_text("guide/x", "see [Slurm](slurm.md), **now**") == "see Slurm (`scaler --docs guide/slurm`), now"
    assert inline_text("x", "[AWS](https://aws.amazon.com/)") == "AWS (https://aws.amazon.com/)"


def test_headings_get_the_anchors_the_pages_link_to() -> None:
    taken: dict[str, int] = {}
    assert slug("3. Run it", taken) == "3-run-it"
    assert slug("`scaler_top` with keys", taken) == "scaler_top-with-keys"
    assert slug("3. Run it", taken) == "3-run-it-1"
    assert slug("What a worker pod is", {}) == "what-a-worker-pod-is"


def test_inline_markup_in_the_site() -> None:
    html = inline_html("guide/a", "a `<b>` [page](../scaling.md#x) ![p](../images/s.svg) **b** <code>c</code> 1 < 2")
    assert html == (
        'a <code>&lt;b&gt;</code> <a href="../scaling.html#x">page</a> <img src="../images/s.svg" alt="p"> '
        "<strong>b</strong> <code>c</code> 1 &lt; 2"
    )


def test_every_page_of_the_site_links_pages_as_html_and_has_unique_anchors() -> None:
    navigation = [("Pages", ["index"])]
    for name in page_names():
        html = page_html(name, navigation)
        assert not re.search(r'href="[^"#:]+\.md[#"]', html), name
        ids = re.findall(r' id="([^"]+)"', html)
        assert len(ids) == len(set(ids)), name


def test_nested_lists_and_tables_are_read_as_blocks() -> None:
    page = blocks("- a\n  more\n  - b\n- c\n\n| x | y \\| z |\n|---|---|\n| 1 | 2 |\n<!-- doc-test: skip -->\n")
    assert [block.kind for block in page] == [BlockKind.LIST, BlockKind.TABLE]
    assert [(item.depth, item.text) for item in page[0].items] == [(0, "a more"), (1, "b"), (0, "c")]
    assert page[1].rows == (("x", "y | z"), ("1", "2"))


def test_the_defaults_are_filled_in_the_site_as_in_the_terminal() -> None:
    html = page_html("guide/troubleshooting", [])
    assert "{{ default." not in html and "{{ default." not in page_text("troubleshooting")
