"""Sphinx configuration of the documentation site (`make docs`: docs/build_site.py builds it into build/docs/html).

The pages are the Markdown files of docs/ and docs/guide/ as they are (MyST reads them; `scaler --docs NAME` prints
the same files from the wheel); the navigation is the toctrees of docs/index.md, the one place a page is listed
(tests/unit/test_docs_site.py fails when a page is in none). The API reference is pdoc's, built beside the pages
into api/ (docs/build_api_reference.py). `{{ default.SECTION.KEY }}` in a page is the default of that setting, read
from its declaration (scaler/config/doc_values.py), as `scaler --docs` fills it too.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # a clone without an install of it: scaler from the clone
    sys.path.insert(0, str(_ROOT))

from scaler.config.doc_values import substitutions  # noqa: E402
from scaler.version import __version__  # noqa: E402

project = "scaler"
author = "the scaler authors"
copyright = "the scaler authors"
version = release = __version__

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["build", "images/*.txt", "images/*.json"]

# GitHub-style anchors for the headings of every level the pages link to (`page.md#a-heading`).
myst_heading_anchors = 4
myst_enable_extensions = ["substitution"]
myst_substitutions: dict[str, Any] = substitutions()

html_theme = "furo"
html_title = f"scaler {__version__}"
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False

# The site is checked without warnings (`-W`); nothing is suppressed.
suppress_warnings: list[str] = []
